/* systemd's readiness notification (sd_notify(3)'s protocol, written here without libsystemd):
 * one datagram of "KEY=VALUE\n" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path,
 * or "@name" for the abstract namespace). Main layer, private. */
#ifndef FLUXFS_MAIN_SD_NOTIFY_H
#define FLUXFS_MAIN_SD_NOTIFY_H

/* Sends state (e.g. "READY=1\nSTATUS=...") when $NOTIFY_SOCKET is set. 0 (also when it is
 * not set) or -errno. */
int fluxfs_sd_notify(const char *state);

#endif
