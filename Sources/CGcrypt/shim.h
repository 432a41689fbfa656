// libgcrypt for kc-secretd's Diffie-Hellman (the 1024-bit modular power), as
// gnome-keyring uses it. Swift cannot call C's variadic gcry_control: its set-up is
// wrapped here.
#ifndef KC_CGCRYPT_SHIM_H
#define KC_CGCRYPT_SHIM_H
#include <gcrypt.h>

/// Initialises libgcrypt once, as a program (not a library) does: the version check,
/// no secure-memory pool (kc-secretd wipes what it holds; libgcrypt wipes an MPI's
/// limbs when it frees them), then "initialisation finished". 0 on success.
static inline int kc_gcrypt_initialize(void) {
    if (gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P, 0)) return 0;
    if (gcry_check_version(GCRYPT_VERSION) == NULL) return -1;
    gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    return 0;
}
#endif
