#ifndef SECUREPUSH_CPOSTGRES_SHIM_H
#define SECUREPUSH_CPOSTGRES_SHIM_H

#include <libpq-fe.h>

/* PG_DIAG_SQLSTATE is a character-literal macro; Swift sees it more reliably as a constant. */
static const int sp_PG_DIAG_SQLSTATE = PG_DIAG_SQLSTATE;

/* libpq prints notices and warnings to stderr by default, which would land in the middle
   of a service's JSON log lines. Connections install this instead. */
static inline void sp_pq_ignore_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

#endif
