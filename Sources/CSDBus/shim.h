// sd-bus (libsystemd) for kc-secretd. Swift cannot call C's variadic functions, so
// the few variadic sd-bus calls kc-secretd needs are wrapped here with fixed arguments.
#ifndef KC_CSDBUS_SHIM_H
#define KC_CSDBUS_SHIM_H
#include <systemd/sd-bus.h>

/// A D-Bus error reply with a name and a message.
static inline int kc_bus_reply_error(sd_bus_message *call, const char *name, const char *message) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_error_set(&error, name, message);
    int result = sd_bus_reply_method_error(call, &error);
    sd_bus_error_free(&error);
    return result;
}

/// A method call without arguments, waiting for its reply.
static inline int kc_bus_call_empty(sd_bus *bus, const char *destination, const char *path, const char *interface,
                                    const char *member, sd_bus_error *error, sd_bus_message **reply) {
    return sd_bus_call_method(bus, destination, path, interface, member, error, reply, NULL);
}
#endif
