#ifndef SECUREPUSH_CLIBEVENT_SHIM_H
#define SECUREPUSH_CLIBEVENT_SHIM_H

/* The C library first: libevent's event-config.h defines _GNU_SOURCE, and system headers
   read after that would declare types (fd_set among them) differently from Swift's Glibc
   module, which fails a clean build. */
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>
#include <pthread.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

/* The libevent flag constants are macros Swift does not always import with the right type. */
static const short sp_EV_READ = EV_READ;
static const short sp_EV_WRITE = EV_WRITE;
static const short sp_EV_PERSIST = EV_PERSIST;
static const short sp_EV_SIGNAL = EV_SIGNAL;
static const short sp_EV_TIMEOUT = EV_TIMEOUT;
static const short sp_BEV_EVENT_READING = BEV_EVENT_READING;
static const short sp_BEV_EVENT_WRITING = BEV_EVENT_WRITING;
static const short sp_BEV_EVENT_EOF = BEV_EVENT_EOF;
static const short sp_BEV_EVENT_ERROR = BEV_EVENT_ERROR;
static const short sp_BEV_EVENT_TIMEOUT = BEV_EVENT_TIMEOUT;
static const short sp_BEV_EVENT_CONNECTED = BEV_EVENT_CONNECTED;
static const int sp_BEV_OPT_CLOSE_ON_FREE = BEV_OPT_CLOSE_ON_FREE;
static const int sp_BEV_OPT_DEFER_CALLBACKS = BEV_OPT_DEFER_CALLBACKS;
static const unsigned sp_LEV_OPT_CLOSE_ON_FREE = LEV_OPT_CLOSE_ON_FREE;
static const unsigned sp_LEV_OPT_REUSEABLE = LEV_OPT_REUSEABLE;
static const unsigned sp_LEV_OPT_CLOSE_ON_EXEC = LEV_OPT_CLOSE_ON_EXEC;
static const int sp_BUFFEREVENT_SSL_ACCEPTING = BUFFEREVENT_SSL_ACCEPTING;

/* OpenSSL macros that are function-like and so invisible to Swift. */
static inline long sp_SSL_CTX_set_min_tls12(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
static inline long sp_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
/* SSL_MODE_RELEASE_BUFFERS: an idle TLS connection gives its record buffers back. */
static inline long sp_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
/* EVP_EC_gen wraps a variadic function Swift cannot call. */
static inline EVP_PKEY *sp_EVP_EC_gen(const char *curve) {
    return EVP_EC_gen(curve);
}

/* glibc declares pthread_setname_np only under _GNU_SOURCE. Names are at most 15 bytes. */
extern int pthread_setname_np(pthread_t thread, const char *name);
static inline int sp_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

#endif
