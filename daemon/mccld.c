/*
 * mccld.c: the MCCL daemon's entry point.  Reads the configuration, opens
 * the Unix socket and the peer listeners, tells systemd it is ready, and runs
 * the main event loop until SIGTERM or SIGINT.
 */
#include <sys/resource.h>

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <jansson.h>
#include <systemd/sd-daemon.h>

#include "mccld.h"
#include "control/control.h"
#include "engine/reduce.h"
#include "transport/transport.h"

/* The process's state (main thread): its own, the control plane is given
 * the loop and the settings (control_init). */
static struct {
	struct event_base *base;
	struct config	 conf;
	const char	*conf_path;
	int		 conf_explicit;
	int		 verbose;	/* -v: debug whatever the config */
} md;

/* -h: on standard output, exit 0; a wrong argument: on stderr, exit 2. */
static void
usage(int asked)
{
	fprintf(asked ? stdout : stderr, "usage: mccld [-dhknv] [-c config] "
	    "[-s socket]\n"
	    "  -c config  configuration file (default %s)\n"
	    "  -s socket  Unix socket path (overrides the configuration)\n"
	    "  -n         check the configuration, print every key's value, "
	    "exit\n"
	    "  -k         print the keys of the configuration, documented, "
	    "exit\n"
	    "  -v         more verbose logging (debug)\n"
	    "  -h, --help this help\n", MCCLD_DEFAULT_CONF);
	exit(asked ? 0 : 2);
}

/* Tell systemd, when it is listening, what the daemon is doing. */
static void
mccld_status_update(void)
{
	uint32_t up = 0;

	for (uint32_t i = 0; i < md.conf.nnodes; i++)
		up += i != md.conf.node_index && peer_is_up(i);
	sd_notifyf(0, "STATUS=%u of %zu peers up, %d jobs, %u clients", up,
	    md.conf.nnodes - 1, job_count(NULL), client_count());
}

static void
watchdog_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

/* Under a watchdog (WatchdogSec=), ping it from the loop at half its period. */
static struct event *
watchdog_start(void)
{
	struct timeval tv;
	struct event *ev;
	uint64_t usec;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return NULL;
	tv.tv_sec = (time_t)(usec / 2 / 1000000);
	tv.tv_usec = (suseconds_t)(usec / 2 % 1000000);
	ev = event_new(md.base, -1, EV_PERSIST, watchdog_cb, NULL);
	event_add(ev, &tv);
	sd_notify(0, "WATCHDOG=1");
	return ev;
}

static void
reload_log_level(void)
{
	log_setlevel(md.verbose ? LOG_DEBUG : md.conf.log_level);
}

static void
reload_p2p_limits(void)
{
	p2p_limits(md.conf.max_unreceived_bytes_per_uid,
	    md.conf.max_unreceived_bytes);
}

static void
reload_scratch_limits(void)
{
	budget_limits(&scratch_budget, md.conf.max_scratch_bytes_per_uid,
	    md.conf.max_scratch_bytes);
}

/* What a reload does besides storing a key, by the hook its row names. */
static void (*const reload_hooks[CONF_HOOK_MAX])(void) = {
	[CONF_HOOK_LOG_LEVEL] = reload_log_level,
	[CONF_HOOK_HEARTBEAT] = peer_heartbeat_reset,
	[CONF_HOOK_P2P_LIMITS] = reload_p2p_limits,
	[CONF_HOOK_SCRATCH_LIMITS] = reload_scratch_limits,
	[CONF_HOOK_ENGINES] = job_retune_all,
};

/* Nodes appended to the cluster by a reload: the peers reach them too. */
static void
nodes_grew(uint32_t old_n)
{
	char err[ERR_MAX];

	if (peer_add_nodes(old_n, err, sizeof(err)) == -1)
		log_warnx("reload: %s", err);
}

/* SIGHUP and mcclctl reload (reload.c says what applies). */
static int
reload(char *err, size_t errlen)
{
	return config_reload(&md.conf, md.conf_path, md.conf_explicit,
	    reload_hooks, nodes_grew, err, errlen);
}

/* mcclctl reload: the same as SIGHUP, answered with what is in force. */
static json_t *
mccld_reload(char *err, size_t errlen)
{
	if (reload(err, errlen) == -1)
		return NULL;
	mccld_status_update();
	return json_pack("{s:b, s:s, s:i, s:i, s:i}", "reloaded", 1,
	    "log_level", log_level_name(md.conf.log_level), "op_timeout_ms",
	    (int)md.conf.op_timeout_ms, "max_pending_ops",
	    (int)md.conf.max_pending_ops, "cluster_size", (int)md.conf.nnodes);
}

static void
hup_cb(int sig, short events, void *arg)
{
	(void)sig;
	(void)events;
	(void)arg;
	char err[ERR_MAX];

	sd_notify(0, "RELOADING=1");
	reload(err, sizeof(err));
	sd_notify(0, "READY=1");
	mccld_status_update();
}

#define SHUTDOWN_MAX_NS	1500000000ULL	/* engines ending their ops */

static struct event	*ev_shutdown;
static uint64_t		 shutdown_by;

/*
 * Exit once every job's local ranks have been told it was aborted (their
 * engines end the op in flight first, in up to a few hundred ms), or at
 * shutdown_by; one more turn of the loop then flushes the error replies
 * and the aborts sent to the peers.
 */
static void
shutdown_cb(int fd, short events, void *arg)
{
	static const struct timeval again = { 0, 20000 };

	(void)fd;
	(void)events;
	(void)arg;
	if (!job_all_told() && now_ns() < shutdown_by) {
		evtimer_add(ev_shutdown, &again);
		return;
	}
	event_base_loopexit(md.base, &(struct timeval){ 0, 200000 });
}

static void
signal_cb(int sig, short events, void *arg)
{
	(void)events;
	(void)arg;
	log_info("received %s, shutting down", strsignal(sig));
	if (ctl_stopping)		/* control_shutdown's */
		return;
	sd_notify(0, "STOPPING=1");
	control_shutdown(strsignal(sig));
	shutdown_by = now_ns() + SHUTDOWN_MAX_NS;
	if ((ev_shutdown = evtimer_new(md.base, shutdown_cb, NULL)) == NULL)
		event_base_loopexit(md.base, &(struct timeval){ 0, 200000 });
	else
		shutdown_cb(-1, 0, NULL);
}

static void
parse_args(int argc, char **argv, const char **socket_path, int *check_only,
    int *verbose)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;

	md.conf_path = MCCLD_DEFAULT_CONF;
	while ((ch = getopt_long(argc, argv, "c:dhkns:v", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'c':
			md.conf_path = optarg;
			md.conf_explicit = 1;
			break;
		case 'd':
			break;		/* foreground is the only mode */
		case 'h':
			usage(1);
			break;
		case 'k':
			config_keys_file(stdout);
			exit(0);
		case 'n':
			*check_only = 1;
			break;
		case 's':
			*socket_path = optarg;
			break;
		case 'v':
			*verbose = 1;
			break;
		default:
			usage(0);
		}
	}
	if (optind != argc)
		usage(0);
}

static void
load_config(const char *socket_path, int verbose)
{
	char err[ERR_MAX];

	if (config_load(md.conf_path, md.conf_explicit, &md.conf, err,
	    sizeof(err)) == -1)
		fatalx("%s", err);
	if (socket_path != NULL) {
		if (strlen(socket_path) >= sizeof(md.conf.socket_path))
			fatalx("socket path %s is too long", socket_path);
		if (socket_path[0] != '/')
			fatalx("-s %s: not an absolute path", socket_path);
		wire_strlcpy(md.conf.socket_path, socket_path,
		    sizeof(md.conf.socket_path));
	}
	md.verbose = verbose;
	reload_log_level();
	config_warnings(&md.conf);
	reload_p2p_limits();		/* the heartbeats start with the peers */
	reload_scratch_limits();
	dial_set_data_cc(md.conf.data_cc);	/* a restart changes it */
}

/*
 * Descriptors: a job holds a link per lane to every other node, and a
 * control connection per peer, so a daemon of a few hundred nodes needs
 * thousands.  Take the hard limit the service was given (LimitNOFILE=).
 */
static void
raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		log_warn("cannot raise the open files limit to %llu",
		    (unsigned long long)rl.rlim_max);
}

/*
 * Fixed malloc thresholds.  glibc raises its mmap threshold to the size of
 * each mapped chunk freed (up to 32 MiB) and its trim threshold to twice
 * that; the jobs' threads then keep their freed buffers at the top of their
 * arenas, which malloc_trim does not shrink: an idle daemon held 14 MB with
 * 127 KiB in use.  Fixed values keep buffers of 256 KiB or more mapped and
 * give back an arena's top past 1 MiB when it is freed.
 */
static void
malloc_setup(void)
{
	if (mallopt(M_MMAP_THRESHOLD, 256 * 1024) == 0 ||
	    mallopt(M_TRIM_THRESHOLD, 1024 * 1024) == 0)
		log_debug("malloc: thresholds not set (not glibc's); idle memory "
		    "may stay with the jobs' threads");
}

int
main(int argc, char **argv)
{
	const char *socket_path = NULL;
	struct event *ev_term, *ev_int, *ev_hup, *ev_watchdog;
	int check_only = 0, verbose = 0;
	char err[ERR_MAX];

	log_init(LOG_INFO, "mccld");
	parse_args(argc, argv, &socket_path, &check_only, &verbose);
	load_config(socket_path, verbose);
	if (check_only) {
		/* A key_file is checked; the host key is not made. */
		if ((md.conf.key_file[0] != '\0' && auth_init(md.conf.key_file,
		    md.conf.socket_path, err, sizeof(err)) == -1) ||
		    scrape_token_load(md.conf.metrics_token_file, err,
		    sizeof(err)) == -1)
			fatalx("%s", err);
		printf("configuration OK: node %s, %zu nodes\n",
		    md.conf.node_name, md.conf.nnodes);
		config_show(&md.conf, stdout);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	malloc_setup();
	if (evthread_use_pthreads() == -1 || (md.base = event_base_new()) == NULL)
		fatalx("cannot initialize libevent");
	control_init(md.base, &md.conf, &(struct control_hooks){
	    mccld_status_update, mccld_reload });
	raise_fd_limit();
	linkcost_init();
	job_init();
	check_init();
	/* The socket's directory is checked before the host key goes there. */
	if (control_listen(md.conf.socket_path, err, sizeof(err)) == -1 ||
	    auth_init(md.conf.key_file, md.conf.socket_path, err,
	    sizeof(err)) == -1 || peer_init(err, sizeof(err)) == -1 ||
	    scrape_init(err, sizeof(err)) == -1)
		fatalx("%s", err);
	job_ctl_restore();	/* the socket's directory is checked */
	ev_term = evsignal_new(md.base, SIGTERM, signal_cb, NULL);
	ev_int = evsignal_new(md.base, SIGINT, signal_cb, NULL);
	ev_hup = evsignal_new(md.base, SIGHUP, hup_cb, NULL);
	event_add(ev_term, NULL);
	event_add(ev_int, NULL);
	event_add(ev_hup, NULL);
	log_info("node %s (%u of %zu) ready on %s, reductions: %s",
	    md.conf.node_name, md.conf.node_index, md.conf.nnodes,
	    md.conf.socket_path, reduce_isa());
	sd_notify(0, "READY=1");
	mccld_status_update();
	ev_watchdog = watchdog_start();
	event_base_dispatch(md.base);
	control_close();
	scrape_close();
	if (job_reap_all() > 0) {
		/* A thread blocked in the kernel on a client's memory ends
		   only with the process: no exit handlers, which would wait
		   for it (a leak checker stops every thread first). */
		log_info("stopped, a job's thread left stuck to the exit");
		_exit(0);
	}
	job_ctl_close();
	check_close();
	engine_shutdown();
	peer_close();
	if (ev_shutdown != NULL)
		event_free(ev_shutdown);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_hup);
	if (ev_watchdog != NULL)
		event_free(ev_watchdog);
	event_base_free(md.base);
	config_free(&md.conf);
	log_info("stopped");
	return 0;
}
