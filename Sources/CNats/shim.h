#ifndef SECUREPUSH_CNATS_SHIM_H
#define SECUREPUSH_CNATS_SHIM_H

/* Only the core client API. The shipped adapters (nats/adapters/libevent.h) define
   functions in the header and call libevent themselves: PushNATS brings its own
   callbacks, driven by PushEventLoop. */
#include <nats/nats.h>

#endif
