/*
 * auth.c: peer authentication.  The cluster shares a secret key (a file,
 * mode 0600), or, without one, the daemons of one host share a key made
 * on that host (the host key); every TCP connection between daemons proves, both ways, that
 * the other side holds it before any other message is accepted: HMAC-SHA256
 * over fresh nonces from both sides, bound to each side's role and node
 * index, so a reply can be neither replayed nor reflected.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "log.h"
#include "transport/transport.h"

static uint8_t	auth_key[crypto_auth_hmacsha256_KEYBYTES];
static int	auth_host;	/* the key is this host's, not the cluster's */

/* Peers can only be on this host: they hold a key made here. */
int
auth_host_only(void)
{
	return auth_host;
}

static int
secret_check(int fd, const char *what, const char *path, char *err,
    size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s is not a regular file", what, path);
		return -1;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen, "%s %s belongs to uid %u: it must "
		    "belong to the daemon's user (uid %u) or root, or another "
		    "user could have written it", what, path,
		    (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if (st.st_mode & 077) {
		snprintf(err, errlen, "%s %s has mode %04o: it must be "
		    "readable by its owner only (chmod 600)", what, path,
		    (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/*
 * A secret file (key_file, the host key, metrics_token_file): a regular
 * file of the daemon's user or root that nobody else may read, of at
 * least min bytes; its first AUTH_SECRET_MAX bytes land in buf.
 */
int
auth_secret_read(const char *what, const char *path, size_t min,
    uint8_t *buf, size_t *len, char *err, size_t errlen)
{
	ssize_t n = -1;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (secret_check(fd, what, path, err, errlen) == 0) {
		if ((n = read(fd, buf, AUTH_SECRET_MAX)) < 0)
			snprintf(err, errlen, "%s %s: %s", what, path,
			    strerror(errno));
		else if (n < (ssize_t)min)
			snprintf(err, errlen, "%s %s: shorter than %zu bytes",
			    what, path, min);
	}
	close(fd);
	if (n < (ssize_t)min)
		return -1;
	*len = (size_t)n;
	return 0;
}

/* Any file format: the key is the hash of the file's bytes. */
static int
key_load(const char *path, char *err, size_t errlen)
{
	uint8_t buf[AUTH_SECRET_MAX];
	size_t len = 0;
	int rc;

	rc = auth_secret_read("key file", path, 32, buf, &len, err, errlen);
	if (rc == 0)
		crypto_generichash(auth_key, sizeof(auth_key), buf, len, NULL, 0);
	sodium_memzero(buf, sizeof(buf));
	return rc;
}

/*
 * The host key: 32 random bytes in a file of this uid, mode 0600, made by
 * the first daemon that needs it.  Written aside under a name nobody can
 * guess (mkostemp), then linked into place, so that a daemon starting at
 * the same moment reads all of it or none.  A file another user put there
 * first is not ours: key_read refuses it.
 */
static int
host_key_make(const char *path, char *err, size_t errlen)
{
	uint8_t key[32];
	char tmp[4200];
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	randombytes_buf(key, sizeof(key));
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1 ||
	    write(fd, key, sizeof(key)) != (ssize_t)sizeof(key) ||
	    fsync(fd) == -1 || (link(tmp, path) == -1 && errno != EEXIST)) {
		snprintf(err, errlen, "host key %s: %s", path, strerror(errno));
		rc = -1;
	}
	if (fd != -1) {
		close(fd);
		unlink(tmp);
	}
	sodium_memzero(key, sizeof(key));
	return rc;
}

/* What to do when the host key can't be had. */
static void
auth_advise(char *err, size_t errlen)
{
	size_t n = strlen(err);

	snprintf(err + n, errlen - n, "; the host key lives beside the socket: "
	    "keep the socket in a directory only the daemon's user can write, "
	    "remove a host.key that is not the daemon's, or set key_file");
}

/*
 * Load the cluster key from key_file; without one, the host key beside
 * the daemon's socket (made on first start).  Every peer must prove it
 * holds the key, on loopback too: without the host key another local
 * user could pose as a node.
 */
int
auth_init(const char *key_file, const char *socket_path, char *err,
    size_t errlen)
{
	char path[4200];
	const char *slash;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialize");
		return -1;
	}
	auth_host = key_file[0] == '\0';
	if (!auth_host)
		return key_load(key_file, err, errlen);
	slash = strrchr(socket_path, '/');
	snprintf(path, sizeof(path), "%.*s/host.key", slash == NULL ? 1 :
	    (int)(slash - socket_path), slash == NULL ? "." : socket_path);
	if ((access(path, F_OK) == -1 && errno == ENOENT &&
	    host_key_make(path, err, errlen) == -1) ||
	    key_load(path, err, errlen) == -1) {
		auth_advise(err, errlen);
		return -1;
	}
	log_info("auth: no key_file: peers authenticate with the host key %s "
	    "(daemons of this user whose sockets share its directory)", path);
	return 0;
}

void
auth_nonce(uint8_t *nonce)
{
	randombytes_buf(nonce, AUTH_NONCE_LEN);
}

/* mac = HMAC(key, role || first nonce || second nonce || index). */
void
auth_mac(uint8_t *mac, char role, const uint8_t *n1, const uint8_t *n2,
    uint32_t index)
{
	crypto_auth_hmacsha256_state st;
	uint8_t idx[4] = { (uint8_t)(index >> 24), (uint8_t)(index >> 16),
	    (uint8_t)(index >> 8), (uint8_t)index };
	uint8_t r = (uint8_t)role;

	crypto_auth_hmacsha256_init(&st, auth_key, sizeof(auth_key));
	crypto_auth_hmacsha256_update(&st, &r, 1);
	crypto_auth_hmacsha256_update(&st, n1, AUTH_NONCE_LEN);
	crypto_auth_hmacsha256_update(&st, n2, AUTH_NONCE_LEN);
	crypto_auth_hmacsha256_update(&st, idx, sizeof(idx));
	crypto_auth_hmacsha256_final(&st, mac);
}

/* 0 when mac is right, in constant time. */
int
auth_check(const uint8_t *mac, char role, const uint8_t *n1,
    const uint8_t *n2, uint32_t index)
{
	uint8_t want[AUTH_MAC_LEN];
	int rc;

	auth_mac(want, role, n1, n2, index);
	rc = sodium_memcmp(want, mac, AUTH_MAC_LEN);
	sodium_memzero(want, sizeof(want));
	return rc == 0 ? 0 : -1;
}
