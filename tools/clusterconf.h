/*
 * clusterconf.h: the cluster configuration for a list of hosts
 * (mcclctl check --write-config).
 */
#ifndef MCCL_CLUSTERCONF_H
#define MCCL_CLUSTERCONF_H

#include <stddef.h>
#include <stdio.h>

/*
 * Print to out the mccld.conf "nodes" of hosts ("[NAME=]HOST[:PORT]", the
 * name defaulting to HOST), each resolved to one numeric address, and a
 * key_file unless all are loopback.  -1 with err set: a host that does not
 * resolve, two that are one, loopback beside other hosts; nothing printed.
 */
int	cluster_conf_write(FILE *out, char *const hosts[], int n, char *err,
	    size_t errlen);

#endif
