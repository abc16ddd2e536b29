/* tls.c - the server's transport credentials (tls.h). */
#include "tls.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd_pem.h"
#include "secrets.h"

/* A PEM file whole (rd_pem.h), or NULL with err set. */
static char *read_pem(const char *key, const char *path, size_t *len, rd_error_t *err) {
  char *buf;
  switch (rd_pem_read(path, RD_TLS_PEM_MAX, &buf, len)) {
  case RD_PEM_OK: return buf;
  case RD_PEM_OPEN: rd_error_set(err, RD_EINVAL, "%s %s: %s", key, path, strerror(errno)); break;
  case RD_PEM_NOMEM: rd_error_set(err, RD_EINVAL, "%s %s: out of memory", key, path); break;
  case RD_PEM_READ: rd_error_set(err, RD_EINVAL, "%s %s: cannot read it", key, path); break;
  case RD_PEM_TOO_BIG:
    rd_error_set(err, RD_EINVAL, "%s %s: larger than %u bytes, not a PEM certificate or key",
                 key, path, RD_TLS_PEM_MAX);
    break;
  case RD_PEM_BINARY:
    rd_error_set(err, RD_EINVAL, "%s %s: holds a NUL byte, not PEM text", key, path);
    break;
  }
  return NULL;
}

/* The first certificate of pem (the server's own), or NULL. */
static X509 *first_cert(const char *pem, size_t len) {
  BIO *b = BIO_new_mem_buf(pem, (int)len);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  return x;
}

static EVP_PKEY *private_key(const char *pem, size_t len) {
  BIO *b = BIO_new_mem_buf(pem, (int)len);
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  return k;
}

/* Check what gRPC would only find at a handshake: the files hold what
 * their keys say, and the key is the certificate's. */
static int check_pems(const rd_config_t *cfg, const char *cert, size_t cert_len, const char *key,
                      size_t key_len, const char *ca, size_t ca_len, rd_error_t *err) {
  int rc = RD_OK;
  X509 *x = first_cert(cert, cert_len);
  EVP_PKEY *k = private_key(key, key_len);
  X509 *c = ca != NULL ? first_cert(ca, ca_len) : NULL;
  if (x == NULL)
    rc = rd_error_set(err, RD_EINVAL, "tls-cert %s: no PEM certificate in it", cfg->tls_cert);
  else if (k == NULL)
    rc = rd_error_set(err, RD_EINVAL, "tls-key %s: no PEM private key in it (an encrypted key "
                      "needs its passphrase removed)", cfg->tls_key);
  else if (X509_check_private_key(x, k) != 1)
    rc = rd_error_set(err, RD_EINVAL, "tls-key %s is not the private key of tls-cert %s",
                      cfg->tls_key, cfg->tls_cert);
  else if (ca != NULL && c == NULL)
    rc = rd_error_set(err, RD_EINVAL, "tls-client-ca %s: no PEM certificate in it",
                      cfg->tls_client_ca);
  X509_free(x);
  X509_free(c);
  EVP_PKEY_free(k);
  ERR_clear_error();
  return rc;
}

int rd_tls_server_credentials(const rd_config_t *cfg, grpc_server_credentials **out, int *tls,
                              rd_error_t *err) {
  *out = NULL;
  if (tls) *tls = 0;
  int has_cert = cfg->tls_cert[0] != '\0', has_key = cfg->tls_key[0] != '\0';
  if (has_cert != has_key)
    return rd_error_set(err, RD_EINVAL, "%s without %s: TLS needs both a certificate and its "
                        "key", has_cert ? "tls-cert" : "tls-key",
                        has_cert ? "tls-key" : "tls-cert");
  if (!has_cert && cfg->tls_client_ca[0] != '\0')
    return rd_error_set(err, RD_EINVAL, "tls-client-ca needs tls-cert and tls-key: client "
                        "certificates are asked for only over TLS");
  if (!has_cert) {
    *out = grpc_insecure_server_credentials_create();
    return *out ? RD_OK : rd_error_set(err, RD_ENOMEM, "out of memory for credentials");
  }
  size_t cert_len = 0, key_len = 0, ca_len = 0;
  char *cert = read_pem("tls-cert", cfg->tls_cert, &cert_len, err);
  char *key = cert ? read_pem("tls-key", cfg->tls_key, &key_len, err) : NULL;
  char *ca = NULL;
  int rc = cert && key ? RD_OK : RD_EINVAL;
  if (rc == RD_OK && cfg->tls_client_ca[0] != '\0' &&
      (ca = read_pem("tls-client-ca", cfg->tls_client_ca, &ca_len, err)) == NULL)
    rc = RD_EINVAL;
  if (rc == RD_OK) rc = check_pems(cfg, cert, cert_len, key, key_len, ca, ca_len, err);
  if (rc == RD_OK) {
    grpc_ssl_pem_key_cert_pair pair = {key, cert};
    /* gRPC copies the PEM strings. */
    *out = grpc_ssl_server_credentials_create_ex(
        ca, &pair, 1,
        ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
           : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        NULL);
    if (*out == NULL) rc = rd_error_set(err, RD_EINVAL, "gRPC refused the TLS credentials");
    else if (tls) *tls = 1;
  }
  if (key) rd_secret_wipe(key, key_len);
  free(cert);
  free(key);
  free(ca);
  return rc;
}
