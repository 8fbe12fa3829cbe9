#ifndef SECUREPUSH_COPENSSL_SHIM_H
#define SECUREPUSH_COPENSSL_SHIM_H

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#endif
