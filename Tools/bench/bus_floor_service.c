/* The Secret Service benchmark's floor (docs/BENCHMARKS.md, "Issue 37"): a provider that
 * does no work. It owns org.freedesktop.secrets on one bus and answers the three calls
 * issue 37 times, reading every argument as kc-secretd does and sending a reply of the
 * same shape and size (an item's path; a DH secret of a 32-byte value: 16 bytes of
 * parameters, 48 of ciphertext, text/plain), with no keyring, no index and no cipher.
 * Peer.Ping is sd-bus's own, as in kc-secretd. What a call to it costs over a Ping is
 * what the bus, sd-bus and the messages' shapes cost, before any provider's work.
 *
 * usage: bus_floor_service ADDRESS ITEM_PATH   (serves until the bus goes away or SIGTERM)
 * Build: cc -O2 -o bus_floor_service bus_floor_service.c -lsystemd
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

static const char *item_path;
static const uint8_t parameters[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static uint8_t sealed[48];

static int search_items(sd_bus_message *call, void *userdata, sd_bus_error *error) {
    const char *key, *value;
    int r = sd_bus_message_enter_container(call, 'a', "{ss}");
    if (r < 0) return r;
    while ((r = sd_bus_message_read(call, "{ss}", &key, &value)) > 0) {
    }
    if (r < 0 || (r = sd_bus_message_exit_container(call)) < 0) return r;
    return sd_bus_reply_method_return(call, "aoao", 1, item_path, 0);
}

static int append_secret(sd_bus_message *reply, const char *session) {
    int r;
    if ((r = sd_bus_message_open_container(reply, 'r', "oayays")) < 0 || (r = sd_bus_message_append(reply, "o", session)) < 0 ||
        (r = sd_bus_message_append_array(reply, 'y', parameters, sizeof parameters)) < 0 ||
        (r = sd_bus_message_append_array(reply, 'y', sealed, sizeof sealed)) < 0 ||
        (r = sd_bus_message_append(reply, "s", "text/plain")) < 0)
        return r;
    return sd_bus_message_close_container(reply);
}

static int get_secrets(sd_bus_message *call, void *userdata, sd_bus_error *error) {
    sd_bus_message *reply = NULL;
    const char *path, *session;
    char first[256] = "";
    int r = sd_bus_message_enter_container(call, 'a', "o");
    if (r < 0) return r;
    while ((r = sd_bus_message_read(call, "o", &path)) > 0)
        if (!first[0]) snprintf(first, sizeof first, "%s", path);
    if (r < 0 || (r = sd_bus_message_exit_container(call)) < 0 || (r = sd_bus_message_read(call, "o", &session)) < 0) return r;
    if ((r = sd_bus_message_new_method_return(call, &reply)) < 0) return r;
    if ((r = sd_bus_message_open_container(reply, 'a', "{o(oayays)}")) >= 0 &&
        (r = sd_bus_message_open_container(reply, 'e', "o(oayays)")) >= 0 && (r = sd_bus_message_append(reply, "o", first)) >= 0 &&
        (r = append_secret(reply, session)) >= 0 && (r = sd_bus_message_close_container(reply)) >= 0 &&
        (r = sd_bus_message_close_container(reply)) >= 0)
        r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static int get_secret(sd_bus_message *call, void *userdata, sd_bus_error *error) {
    sd_bus_message *reply = NULL;
    const char *session;
    int r = sd_bus_message_read(call, "o", &session);
    if (r < 0 || (r = sd_bus_message_new_method_return(call, &reply)) < 0) return r;
    if ((r = append_secret(reply, session)) >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static const sd_bus_vtable service_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("SearchItems", "a{ss}", "aoao", search_items, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("GetSecrets", "aoo", "a{o(oayays)}", get_secrets, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

static const sd_bus_vtable item_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("GetSecret", "o", "(oayays)", get_secret, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

static volatile sig_atomic_t stopping;

static void stop(int signal) { stopping = 1; }

int main(int argc, char **argv) {
    sd_bus *bus = NULL;
    int r;
    if (argc != 3) {
        fprintf(stderr, "usage: bus_floor_service ADDRESS ITEM_PATH\n");
        return 64;
    }
    item_path = argv[2];
    memset(sealed, 0xA5, sizeof sealed);
    signal(SIGTERM, stop);
    if ((r = sd_bus_new(&bus)) < 0 || (r = sd_bus_set_address(bus, argv[1])) < 0 || (r = sd_bus_set_bus_client(bus, 1)) < 0 ||
        (r = sd_bus_start(bus)) < 0 ||
        (r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", service_vtable, NULL)) < 0 ||
        (r = sd_bus_add_object_vtable(bus, NULL, item_path, "org.freedesktop.Secret.Item", item_vtable, NULL)) < 0 ||
        (r = sd_bus_request_name(bus, "org.freedesktop.secrets", 0)) < 0) {
        fprintf(stderr, "bus_floor_service: %s\n", strerror(-r));
        return 1;
    }
    while (!stopping) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) break;
        if (r > 0) continue;
        r = sd_bus_wait(bus, UINT64_MAX);
        if (r < 0 && r != -EINTR) break;
    }
    sd_bus_flush_close_unref(bus);
    return 0;
}
