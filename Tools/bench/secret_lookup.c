/* The Secret Service benchmark's client (docs/BENCHMARKS.md, "The Secret Service"): one
 * process connected to two session buses, each with a Secret Service provider (kc-secretd
 * and gnome-keyring-daemon), timing the calls of a lookup on each, the two alternately.
 *
 * usage: secret_lookup lookup dh|plain ROUNDS ADDRESS_A ADDRESS_B SERVICE USERNAME VALUE
 *          per round and bus: OpenSession, SearchItems({service, username}), GetSecrets
 *          of the item found; prints one line per round:
 *          a_total a_open a_search a_get b_total b_open b_search b_get   (nanoseconds)
 *        secret_lookup open ROUNDS ADDRESS_A ADDRESS_B
 *          per round and bus: OpenSession with DH and with plain (which goes first
 *          alternates too); prints a_dh a_plain b_dh b_plain   (nanoseconds)
 *        secret_lookup ping ROUNDS ADDRESS_A ADDRESS_B
 *          per round and bus: three org.freedesktop.DBus.Peer.Ping calls to the provider,
 *          the floor of three calls (bus and event loop, no work); prints a b
 *        secret_lookup floor ROUNDS ADDRESS_A ADDRESS_B SERVICE USERNAME VALUE
 *          issue 37's comparison: on each bus one connection and one DH session, kept;
 *          per round and bus, each call right after a Peer.Ping on the same connection:
 *          Ping, SearchItems({service, username}), Ping, GetSecrets([item]), Ping,
 *          Item.GetSecret; prints per round
 *          a_ping1 a_search a_ping2 a_gets a_ping3 a_get b_…   (nanoseconds)
 *        secret_lookup shape ROUNDS ADDRESS SERVICE USERNAME
 *          the same round against a provider without sessions (bus_floor_service.c):
 *          the session path is a made-up one and the secret is not checked; prints
 *          ping1 search ping2 gets ping3 get   (nanoseconds)
 *        secret_lookup keyring ROUNDS RING_DESCRIPTION ITEM
 *          the kernel's part of those calls, without D-Bus: from the user keyring, the
 *          keyring RING_DESCRIPTION, in it the user key ITEM, then its size (what a
 *          search asks of each item it reports) or its value (what a GetSecret reads);
 *          prints per round: size_probe value_read   (nanoseconds)
 *
 * Which bus goes first alternates from round to round. Each session is closed after the
 * timed calls, outside the timing. The client's DH key pair (RFC 2409 group 2, OpenSSL's
 * BN) is made once, so what is timed is the bus round trips and the providers' work. Once
 * per bus, outside the timing, the secret is decrypted (HKDF-SHA256 of the shared secret
 * left-padded to 128 bytes, no salt, empty info, 16 bytes; AES-128-CBC, PKCS#7, the IV in
 * the secret's parameters) and compared with VALUE; every round checks that one item was
 * found and one secret of the first round's size came back.
 *
 * Build: cc -O2 -o secret_lookup secret_lookup.c -lsystemd -lcrypto
 */
#define _GNU_SOURCE
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#define SECRETS "org.freedesktop.secrets"
#define SERVICE_PATH "/org/freedesktop/secrets"
#define SERVICE_IFACE "org.freedesktop.Secret.Service"
#define DH "dh-ietf1024-sha256-aes128-cbc-pkcs7"

static void die(const char *what, int r, const sd_bus_error *error) {
    fprintf(stderr, "secret_lookup: %s: %s\n", what,
            error && error->message ? error->message : strerror(r < 0 ? -r : r));
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static sd_bus *connect_to(const char *address) {
    sd_bus *bus = NULL;
    int r = sd_bus_new(&bus);
    if (r < 0) die("sd_bus_new", r, NULL);
    if ((r = sd_bus_set_address(bus, address)) < 0) die("sd_bus_set_address", r, NULL);
    if ((r = sd_bus_set_bus_client(bus, 1)) < 0) die("sd_bus_set_bus_client", r, NULL);
    if ((r = sd_bus_start(bus)) < 0) die("sd_bus_start", r, NULL);
    return bus;
}

/* The client's half of the DH exchange, made once. */
static BIGNUM *prime, *private_key;
static unsigned char public_key[128];

static void make_key_pair(void) {
    BN_CTX *ctx = BN_CTX_new();
    BIGNUM *generator = BN_new(), *public = BN_new();
    private_key = BN_new();
    prime = BN_get_rfc2409_prime_1024(NULL);
    if (!ctx || !generator || !public || !private_key || !prime || !BN_set_word(generator, 2) ||
        !BN_rand_range(private_key, prime) || !BN_mod_exp(public, generator, private_key, prime, ctx) ||
        BN_bn2binpad(public, public_key, sizeof public_key) != sizeof public_key) {
        fprintf(stderr, "secret_lookup: no DH key pair\n");
        exit(1);
    }
    BN_free(generator);
    BN_free(public);
    BN_CTX_free(ctx);
}

/* The session's AES key from the provider's public key. */
static void session_key(const unsigned char *peer, size_t size, unsigned char key[16]) {
    BN_CTX *ctx = BN_CTX_new();
    BIGNUM *theirs = BN_bin2bn(peer, (int)size, NULL), *shared = BN_new();
    unsigned char padded[128];
    EVP_PKEY_CTX *kdf = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    size_t length = 16;
    if (!ctx || !theirs || !shared || !BN_mod_exp(shared, theirs, private_key, prime, ctx) ||
        BN_bn2binpad(shared, padded, sizeof padded) != sizeof padded || !kdf || EVP_PKEY_derive_init(kdf) <= 0 ||
        EVP_PKEY_CTX_set_hkdf_md(kdf, EVP_sha256()) <= 0 ||
        EVP_PKEY_CTX_set1_hkdf_key(kdf, padded, sizeof padded) <= 0 ||
        EVP_PKEY_CTX_add1_hkdf_info(kdf, (const unsigned char *)"", 0) <= 0 ||
        EVP_PKEY_derive(kdf, key, &length) <= 0 || length != 16) {
        fprintf(stderr, "secret_lookup: no session key\n");
        exit(1);
    }
    EVP_PKEY_CTX_free(kdf);
    BN_free(theirs);
    BN_free(shared);
    BN_CTX_free(ctx);
}

static int decrypt(const unsigned char key[16], const unsigned char *iv, size_t iv_size, const unsigned char *sealed,
                   size_t size, unsigned char *plain) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int written = 0, last = 0;
    if (!ctx || iv_size != 16 || EVP_DecryptInit_ex(ctx, EVP_aes_128_cbc(), NULL, key, iv) != 1 ||
        EVP_DecryptUpdate(ctx, plain, &written, sealed, (int)size) != 1 ||
        EVP_DecryptFinal_ex(ctx, plain + written, &last) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return -1;
    }
    EVP_CIPHER_CTX_free(ctx);
    return written + last;
}

/* OpenSession; returns the session's path (owned by the caller) and, for DH, the
 * provider's public key in `peer`. */
static char *open_session(sd_bus *bus, int dh, unsigned char *peer, size_t *peer_size) {
    sd_bus_message *call = NULL, *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    const char *path;
    int r = sd_bus_message_new_method_call(bus, &call, SECRETS, SERVICE_PATH, SERVICE_IFACE, "OpenSession");
    if (r < 0) die("new OpenSession", r, NULL);
    if (dh) {
        if ((r = sd_bus_message_append(call, "s", DH)) < 0 || (r = sd_bus_message_open_container(call, 'v', "ay")) < 0 ||
            (r = sd_bus_message_append_array(call, 'y', public_key, sizeof public_key)) < 0 ||
            (r = sd_bus_message_close_container(call)) < 0)
            die("append OpenSession", r, NULL);
    } else if ((r = sd_bus_message_append(call, "sv", "plain", "s", "")) < 0) {
        die("append OpenSession", r, NULL);
    }
    if ((r = sd_bus_call(bus, call, 0, &error, &reply)) < 0) die("OpenSession", r, &error);
    if (dh) {
        const void *bytes;
        size_t size;
        if ((r = sd_bus_message_enter_container(reply, 'v', "ay")) < 0 ||
            (r = sd_bus_message_read_array(reply, 'y', &bytes, &size)) < 0 || (r = sd_bus_message_exit_container(reply)) < 0)
            die("OpenSession's output", r, NULL);
        if (size == 0 || size > 128) die("OpenSession's output is not a 1024-bit public key", EINVAL, NULL);
        memcpy(peer, bytes, size);
        *peer_size = size;
    } else if ((r = sd_bus_message_skip(reply, "v")) < 0) {
        die("OpenSession's output", r, NULL);
    }
    if ((r = sd_bus_message_read(reply, "o", &path)) < 0) die("OpenSession's session", r, NULL);
    char *copy = strdup(path);
    sd_bus_message_unref(reply);
    sd_bus_message_unref(call);
    return copy;
}

static void close_session(sd_bus *bus, const char *session) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int r = sd_bus_call_method(bus, SECRETS, session, "org.freedesktop.Secret.Session", "Close", &error, NULL, "");
    if (r < 0) die("Session.Close", r, &error);
}

/* SearchItems by service and username; returns the one unlocked item's path. */
static char *search(sd_bus *bus, const char *service, const char *username) {
    sd_bus_message *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    const char *path, *first = NULL;
    int count = 0;
    int r = sd_bus_call_method(bus, SECRETS, SERVICE_PATH, SERVICE_IFACE, "SearchItems", &error, &reply, "a{ss}", 2,
                               "service", service, "username", username);
    if (r < 0) die("SearchItems", r, &error);
    if ((r = sd_bus_message_enter_container(reply, 'a', "o")) < 0) die("SearchItems' unlocked", r, NULL);
    while ((r = sd_bus_message_read(reply, "o", &path)) > 0) {
        if (!first) first = path;
        count++;
    }
    if (r < 0) die("SearchItems' unlocked", r, NULL);
    if (count != 1) {
        fprintf(stderr, "secret_lookup: SearchItems found %d unlocked items, not 1\n", count);
        exit(1);
    }
    char *copy = strdup(first);
    sd_bus_message_unref(reply);
    return copy;
}

/* GetSecrets of one item; copies the IV and the value out, returns the value's size. */
static size_t get_secret(sd_bus *bus, const char *item, const char *session, unsigned char *iv, size_t *iv_size,
                         unsigned char *value, size_t capacity) {
    sd_bus_message *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    const char *path, *secret_session, *content_type;
    const void *parameters, *bytes;
    size_t parameters_size, size;
    int r = sd_bus_call_method(bus, SECRETS, SERVICE_PATH, SERVICE_IFACE, "GetSecrets", &error, &reply, "aoo", 1, item,
                               session);
    if (r < 0) die("GetSecrets", r, &error);
    if ((r = sd_bus_message_enter_container(reply, 'a', "{o(oayays)}")) < 0 ||
        (r = sd_bus_message_enter_container(reply, 'e', "o(oayays)")) <= 0 ||
        (r = sd_bus_message_read(reply, "o", &path)) < 0 ||
        (r = sd_bus_message_enter_container(reply, 'r', "oayays")) < 0 ||
        (r = sd_bus_message_read(reply, "o", &secret_session)) < 0 ||
        (r = sd_bus_message_read_array(reply, 'y', &parameters, &parameters_size)) < 0 ||
        (r = sd_bus_message_read_array(reply, 'y', &bytes, &size)) < 0 ||
        (r = sd_bus_message_read(reply, "s", &content_type)) < 0)
        die("GetSecrets' secret (none came back?)", r == 0 ? ENOENT : r, NULL);
    if (size > capacity || parameters_size > 16) die("GetSecrets' secret is too large", EMSGSIZE, NULL);
    memcpy(iv, parameters, parameters_size);
    *iv_size = parameters_size;
    memcpy(value, bytes, size);
    sd_bus_message_unref(reply);
    return size;
}

struct provider {
    sd_bus *bus;
    size_t secret_size; /* of the first round's reply; 0 before it */
};

/* One lookup on one bus: the three calls timed, the session closed after. */
static void lookup(struct provider *p, int dh, const char *service, const char *username, const char *expected,
                   uint64_t times[4]) {
    unsigned char peer[128], iv[16], value[4096];
    size_t peer_size = 0, iv_size = 0;
    uint64_t start = now_ns();
    char *session = open_session(p->bus, dh, peer, &peer_size);
    uint64_t opened = now_ns();
    char *item = search(p->bus, service, username);
    uint64_t searched = now_ns();
    size_t size = get_secret(p->bus, item, session, iv, &iv_size, value, sizeof value);
    uint64_t done = now_ns();
    close_session(p->bus, session);
    times[0] = done - start;
    times[1] = opened - start;
    times[2] = searched - opened;
    times[3] = done - searched;

    if (p->secret_size == 0) {
        /* Once per bus, outside the timing: the secret is the one stored. */
        unsigned char plain[4096 + 16];
        int plain_size;
        if (dh) {
            unsigned char key[16];
            session_key(peer, peer_size, key);
            plain_size = decrypt(key, iv, iv_size, value, size, plain);
        } else {
            memcpy(plain, value, size);
            plain_size = (int)size;
        }
        if (plain_size != (int)strlen(expected) || memcmp(plain, expected, plain_size) != 0) {
            fprintf(stderr, "secret_lookup: the secret read back is not the one stored (%d bytes)\n", plain_size);
            exit(1);
        }
        p->secret_size = size;
    } else if (size != p->secret_size) {
        fprintf(stderr, "secret_lookup: a secret of %zu bytes, not %zu\n", size, p->secret_size);
        exit(1);
    }
    free(session);
    free(item);
}

static uint64_t time_open(sd_bus *bus, int dh) {
    unsigned char peer[128];
    size_t peer_size;
    uint64_t start = now_ns();
    char *session = open_session(bus, dh, peer, &peer_size);
    uint64_t elapsed = now_ns() - start;
    close_session(bus, session);
    free(session);
    return elapsed;
}

static uint64_t time_pings(sd_bus *bus) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    uint64_t start = now_ns();
    for (int call = 0; call < 3; call++) {
        int r = sd_bus_call_method(bus, SECRETS, SERVICE_PATH, "org.freedesktop.DBus.Peer", "Ping", &error, NULL, "");
        if (r < 0) die("Peer.Ping", r, &error);
    }
    return now_ns() - start;
}

/* Item.GetSecret of one item; returns the value's size (checked against the first
 * round's by the caller). */
static size_t get_item_secret(sd_bus *bus, const char *item, const char *session) {
    sd_bus_message *reply = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    const char *secret_session, *content_type;
    const void *parameters, *bytes;
    size_t parameters_size, size;
    int r = sd_bus_call_method(bus, SECRETS, item, "org.freedesktop.Secret.Item", "GetSecret", &error, &reply, "o",
                               session);
    if (r < 0) die("Item.GetSecret", r, &error);
    if ((r = sd_bus_message_enter_container(reply, 'r', "oayays")) < 0 ||
        (r = sd_bus_message_read(reply, "o", &secret_session)) < 0 ||
        (r = sd_bus_message_read_array(reply, 'y', &parameters, &parameters_size)) < 0 ||
        (r = sd_bus_message_read_array(reply, 'y', &bytes, &size)) < 0 ||
        (r = sd_bus_message_read(reply, "s", &content_type)) < 0)
        die("Item.GetSecret's secret", r, NULL);
    sd_bus_message_unref(reply);
    return size;
}

static uint64_t time_ping(sd_bus *bus) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    uint64_t start = now_ns();
    int r = sd_bus_call_method(bus, SECRETS, SERVICE_PATH, "org.freedesktop.DBus.Peer", "Ping", &error, NULL, "");
    if (r < 0) die("Peer.Ping", r, &error);
    return now_ns() - start;
}

/* One connection, one DH session and the item's path, kept over the rounds. */
struct floor_provider {
    struct provider p;
    char *session, *item;
};

/* Issue 37's round on one bus: each call right after a Ping on the same connection. */
static void floor_round(struct floor_provider *f, const char *service, const char *username, uint64_t times[6]) {
    unsigned char iv[16], value[4096];
    size_t iv_size;
    times[0] = time_ping(f->p.bus);
    uint64_t start = now_ns();
    char *item = search(f->p.bus, service, username);
    times[1] = now_ns() - start;
    if (strcmp(item, f->item) != 0) die("SearchItems found another item than the first round's", EINVAL, NULL);
    free(item);
    times[2] = time_ping(f->p.bus);
    start = now_ns();
    size_t size = get_secret(f->p.bus, f->item, f->session, iv, &iv_size, value, sizeof value);
    times[3] = now_ns() - start;
    times[4] = time_ping(f->p.bus);
    start = now_ns();
    size_t single = get_item_secret(f->p.bus, f->item, f->session);
    times[5] = now_ns() - start;
    if (size != f->p.secret_size || single != f->p.secret_size) die("a secret of another size than the first", EINVAL, NULL);
}

/* keyctl(2) without libkeyutils: KEYCTL_SEARCH (10) and KEYCTL_READ (11); the user
 * keyring is -4. */
static long keyctl_search(long ring, const char *type, const char *description) {
    return syscall(SYS_keyctl, 10, ring, type, description, 0);
}

static long keyctl_read(long key, char *buffer, size_t size) {
    return syscall(SYS_keyctl, 11, key, buffer, size);
}

/* The three calls of one item's look: its service's keyring, the item, its size or value. */
static uint64_t time_keyring(const char *ring_description, const char *item, int read_value) {
    char value[4096];
    uint64_t start = now_ns();
    long ring = keyctl_search(-4, "keyring", ring_description);
    long key = ring < 0 ? -1 : keyctl_search(ring, "user", item);
    long size = key < 0 ? -1 : read_value ? keyctl_read(key, value, sizeof value) : keyctl_read(key, NULL, 0);
    uint64_t elapsed = now_ns() - start;
    if (size <= 0) die("the item in the kernel", errno, NULL);
    return elapsed;
}

static void usage(void) {
    fprintf(stderr, "usage: secret_lookup lookup dh|plain ROUNDS ADDRESS_A ADDRESS_B SERVICE USERNAME VALUE\n"
                    "       secret_lookup open|ping ROUNDS ADDRESS_A ADDRESS_B\n"
                    "       secret_lookup floor ROUNDS ADDRESS_A ADDRESS_B SERVICE USERNAME VALUE\n"
                    "       secret_lookup shape ROUNDS ADDRESS SERVICE USERNAME\n"
                    "       secret_lookup keyring ROUNDS RING_DESCRIPTION ITEM\n");
    exit(64);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    if (strcmp(argv[1], "keyring") == 0 && argc == 5) {
        long rounds = strtol(argv[2], NULL, 10);
        for (long round = 0; round < rounds; round++) {
            uint64_t probe = time_keyring(argv[3], argv[4], 0);
            uint64_t read = time_keyring(argv[3], argv[4], 1);
            printf("%" PRIu64 " %" PRIu64 "\n", probe, read);
        }
        return 0;
    }
    make_key_pair();
    if (strcmp(argv[1], "lookup") == 0 && argc == 9) {
        int dh = strcmp(argv[2], "dh") == 0;
        if (!dh && strcmp(argv[2], "plain") != 0) usage();
        long rounds = strtol(argv[3], NULL, 10);
        struct provider providers[2] = {{connect_to(argv[4]), 0}, {connect_to(argv[5]), 0}};
        for (long round = 0; round < rounds; round++) {
            uint64_t times[2][4];
            int first = (int)(round & 1);
            lookup(&providers[first], dh, argv[6], argv[7], argv[8], times[first]);
            lookup(&providers[!first], dh, argv[6], argv[7], argv[8], times[!first]);
            printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", times[0][0], times[0][1], times[0][2], times[0][3], times[1][0],
                   times[1][1], times[1][2], times[1][3]);
        }
    } else if (strcmp(argv[1], "open") == 0 && argc == 5) {
        long rounds = strtol(argv[2], NULL, 10);
        sd_bus *buses[2] = {connect_to(argv[3]), connect_to(argv[4])};
        for (long round = 0; round < rounds; round++) {
            uint64_t times[2][2];
            int first = (int)(round & 1);
            for (int turn = 0; turn < 2; turn++) {
                int which = turn == 0 ? first : !first;
                /* DH and plain alternate their order too. */
                int dh_first = (int)((round >> 1) & 1);
                times[which][!dh_first] = time_open(buses[which], dh_first);
                times[which][dh_first] = time_open(buses[which], !dh_first);
            }
            printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", times[0][0], times[0][1], times[1][0], times[1][1]);
        }
    } else if (strcmp(argv[1], "ping") == 0 && argc == 5) {
        long rounds = strtol(argv[2], NULL, 10);
        sd_bus *buses[2] = {connect_to(argv[3]), connect_to(argv[4])};
        for (long round = 0; round < rounds; round++) {
            uint64_t times[2];
            int first = (int)(round & 1);
            times[first] = time_pings(buses[first]);
            times[!first] = time_pings(buses[!first]);
            printf("%" PRIu64 " %" PRIu64 "\n", times[0], times[1]);
        }
    } else if (strcmp(argv[1], "shape") == 0 && argc == 6) {
        long rounds = strtol(argv[2], NULL, 10);
        struct floor_provider f = {{connect_to(argv[3]), 0}, strdup(SERVICE_PATH "/session/s1"), NULL};
        unsigned char iv[16], value[4096];
        size_t iv_size;
        f.item = search(f.p.bus, argv[4], argv[5]);
        f.p.secret_size = get_secret(f.p.bus, f.item, f.session, iv, &iv_size, value, sizeof value);
        for (long round = 0; round < rounds; round++) {
            uint64_t times[6];
            floor_round(&f, argv[4], argv[5], times);
            printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", times[0], times[1], times[2], times[3],
                   times[4], times[5]);
        }
    } else if (strcmp(argv[1], "floor") == 0 && argc == 8) {
        long rounds = strtol(argv[2], NULL, 10);
        struct floor_provider providers[2];
        for (int which = 0; which < 2; which++) {
            /* A first lookup on a session of its own checks the secret (decrypted), then
             * the session and the item the rounds use. */
            struct floor_provider *f = &providers[which];
            uint64_t ignored[4];
            unsigned char peer[128];
            size_t peer_size;
            f->p = (struct provider){connect_to(argv[3 + which]), 0};
            lookup(&f->p, 1, argv[5], argv[6], argv[7], ignored);
            f->session = open_session(f->p.bus, 1, peer, &peer_size);
            f->item = search(f->p.bus, argv[5], argv[6]);
        }
        for (long round = 0; round < rounds; round++) {
            uint64_t times[2][6];
            int first = (int)(round & 1);
            floor_round(&providers[first], argv[5], argv[6], times[first]);
            floor_round(&providers[!first], argv[5], argv[6], times[!first]);
            for (int which = 0; which < 2; which++)
                for (int call = 0; call < 6; call++) printf("%" PRIu64 "%c", times[which][call], which == 1 && call == 5 ? '\n' : ' ');
        }
        for (int which = 0; which < 2; which++) close_session(providers[which].p.bus, providers[which].session);
    } else {
        usage();
    }
    return 0;
}
