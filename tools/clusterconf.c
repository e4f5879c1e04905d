/*
 * clusterconf.c: mcclctl check --write-config HOST...: the cluster's
 * configuration for a list of hosts, one file for every node (each finds
 * itself by its host name, mccld.conf(5) "node").  Each host is resolved
 * here, once, so the file names addresses, not names that may resolve
 * differently on each node, and two hosts that are one are caught now
 * rather than as a cluster that never forms.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clusterconf.h"
#include "peer.h"

#define CLUSTER_KEY_FILE	"/etc/mccl/cluster.key"

struct node_spec {
	char	name[NODE_NAME_MAX];
	char	host[256];
	char	address[INET6_ADDRSTRLEN + 8];	/* "[a]:port", numeric */
	int	loopback;
};

/* "HOST", "HOST:PORT", "[V6]:PORT" or a bare IPv6 address into host, port. */
static int
split_host_port(const char *s, char *host, size_t hostlen, unsigned *port,
    char *err, size_t errlen)
{
	const char *end, *colon = NULL;
	char *num_end;
	unsigned long v;

	if (s[0] == '[') {
		if ((end = strchr(s, ']')) == NULL ||
		    (end[1] != '\0' && end[1] != ':')) {
			snprintf(err, errlen, "\"%s\": expected [address]:port",
			    s);
			return -1;
		}
		colon = end[1] == ':' ? end + 1 : NULL;
		s++;
	} else if ((colon = strchr(s, ':')) != NULL &&
	    strchr(colon + 1, ':') != NULL) {
		colon = NULL;			/* a bare IPv6 address */
		end = s + strlen(s);
	} else
		end = colon != NULL ? colon : s + strlen(s);
	if (end == s || (size_t)(end - s) >= hostlen) {
		snprintf(err, errlen, "\"%s\": %s host", s, end == s ?
		    "empty" : "too long a");
		return -1;
	}
	memcpy(host, s, (size_t)(end - s));
	host[end - s] = '\0';
	*port = PEER_PORT_DEFAULT;
	if (colon == NULL)
		return 0;
	errno = 0;
	v = strtoul(colon + 1, &num_end, 10);
	if (colon[1] == '\0' || *num_end != '\0' || errno != 0 || v < 1 ||
	    v > 65535) {
		snprintf(err, errlen, "\"%s\": the port must be 1 to 65535", s);
		return -1;
	}
	*port = (unsigned)v;
	return 0;
}

static int
addr_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)->
		    sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)
	    (const void *)sa)->sin6_addr);
}

/* "[NAME=]HOST[:PORT]" into spec: named, resolved, numeric. */
static int
node_parse(const char *arg, struct node_spec *spec, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	const char *eq = strchr(arg, '='), *hostport = eq ? eq + 1 : arg;
	char ip[INET6_ADDRSTRLEN];
	unsigned port;
	int rc;

	if (split_host_port(hostport, spec->host, sizeof(spec->host), &port,
	    err, errlen) == -1)
		return -1;
	if (eq != NULL && (eq == arg || eq - arg >= NODE_NAME_MAX)) {
		snprintf(err, errlen, "\"%s\": a node name is 1 to %d bytes",
		    arg, NODE_NAME_MAX - 1);
		return -1;
	}
	if (eq == NULL && strlen(spec->host) >= NODE_NAME_MAX) {
		snprintf(err, errlen, "\"%s\": too long for a node name; name "
		    "it: NAME=%s", spec->host, spec->host);
		return -1;
	}
	snprintf(spec->name, sizeof(spec->name), "%.*s",
	    (int)(eq ? eq - arg : (long)strlen(spec->host)), eq ? arg :
	    spec->host);
	if ((rc = getaddrinfo(spec->host, NULL, &hints, &res)) != 0) {
		snprintf(err, errlen, "\"%s\": %s", spec->host,
		    gai_strerror(rc));
		return -1;
	}
	rc = getnameinfo(res->ai_addr, res->ai_addrlen, ip, sizeof(ip), NULL,
	    0, NI_NUMERICHOST);
	spec->loopback = addr_loopback(res->ai_addr);
	if (rc == 0)
		snprintf(spec->address, sizeof(spec->address),
		    res->ai_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
	else
		snprintf(err, errlen, "\"%s\": %s", spec->host, gai_strerror(rc));
	freeaddrinfo(res);
	return rc == 0 ? 0 : -1;
}

/* Two nodes that are one, or loopback beside hosts that cannot reach it. */
static int
nodes_conflict(const struct node_spec *s, int n, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++)
		for (int k = 0; k < i; k++) {
			if (strcmp(s[i].name, s[k].name) == 0) {
				snprintf(err, errlen, "two nodes named \"%s\"",
				    s[i].name);
				return -1;
			}
			if (strcmp(s[i].address, s[k].address) == 0) {
				snprintf(err, errlen, "\"%s\" and \"%s\" are "
				    "both %s", s[k].host, s[i].host,
				    s[i].address);
				return -1;
			}
			if (s[i].loopback != s[k].loopback) {
				const struct node_spec *lo = s[i].loopback ?
				    &s[i] : &s[k], *far = lo == &s[i] ? &s[k] :
				    &s[i];

				snprintf(err, errlen, "\"%s\" is a loopback "
				    "address (%s): node %s could not reach it",
				    lo->host, lo->address, far->name);
				return -1;
			}
		}
	return 0;
}

static json_t *
conf_doc(const struct node_spec *s, int n)
{
	json_t *nodes = json_array(), *doc;

	for (int i = 0; i < n; i++)
		json_array_append_new(nodes, json_pack("{s:s, s:s}", "name",
		    s[i].name, "address", s[i].address));
	doc = json_pack("{s:o}", "nodes", nodes);
	if (doc != NULL && !s[0].loopback)
		json_object_set_new(doc, "key_file",
		    json_string(CLUSTER_KEY_FILE));
	return doc;
}

int
cluster_conf_write(FILE *out, char *const hosts[], int n, char *err,
    size_t errlen)
{
	struct node_spec *specs;
	json_t *doc = NULL;
	int rc = -1;

	if (n < 1) {
		snprintf(err, errlen, "name the hosts: [NAME=]HOST[:PORT]...");
		return -1;
	}
	if ((specs = calloc((size_t)n, sizeof(*specs))) == NULL) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (node_parse(hosts[i], &specs[i], err, errlen) == -1)
			goto out;
	if (nodes_conflict(specs, n, err, errlen) == -1)
		goto out;
	if ((doc = conf_doc(specs, n)) == NULL ||
	    json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == -1 ||
	    fputc('\n', out) == EOF || fflush(out) == EOF) {
		snprintf(err, errlen, "cannot write the configuration: %s",
		    strerror(errno));
		goto out;
	}
	rc = 0;
out:
	json_decref(doc);
	free(specs);
	return rc;
}
