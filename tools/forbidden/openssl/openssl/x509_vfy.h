// Found ahead of the real <openssl/x509_vfy.h> by every room that does not declare OpenSSL.
#error "OpenSSL belongs to src/net only (DESIGN.md idea 4); this room does not declare it in meson.build"
