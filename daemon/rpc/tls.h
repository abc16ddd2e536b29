/* tls.h - the server's transport credentials: plaintext, or TLS from
 * PEM files (--tls-cert, --tls-key, optionally --tls-client-ca).
 *
 * gRPC core does the TLS (its own BoringSSL); this file reads the PEM
 * files at start and checks them with libcrypto first, so a wrong path, a
 * file that is not PEM, or a key that does not belong to the certificate
 * stops the start with a message naming the file, instead of a failed
 * listen or failed handshakes later. With --tls-client-ca every client
 * must present a certificate one of those CAs signed (mutual TLS); the
 * tokens still decide what a client may do.
 */
#ifndef RD_TLS_H
#define RD_TLS_H

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "config.h"
#include "rd_error.h"

/* PEM files larger than this are not certificates or keys. */
#define RD_TLS_PEM_MAX (1u << 20)

/* The credentials cfg asks for into *out (release with
 * grpc_server_credentials_release): insecure when cfg->tls_cert is empty.
 * RD_EINVAL naming the file and the problem: a key without a certificate
 * or the reverse, a client CA without a certificate, an unreadable or
 * oversized file, no PEM certificate or key in it, a key that does not
 * match the certificate. *tls (may be NULL) is set to 1 for TLS. */
int rd_tls_server_credentials(const rd_config_t *cfg, grpc_server_credentials **out, int *tls,
                              rd_error_t *err);

#endif
