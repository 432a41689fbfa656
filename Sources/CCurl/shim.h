// libcurl for kc-agent's requests to OpenBao (HTTPS with a CA file and a client
// certificate, kept-alive connections). Swift cannot call C's variadic
// curl_easy_setopt and curl_easy_getinfo: one typed wrapper per argument kind.
#ifndef KC_CCURL_SHIM_H
#define KC_CCURL_SHIM_H
#include <curl/curl.h>

typedef size_t (*kc_curl_write_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode kc_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kc_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kc_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kc_curl_set_write_callback(CURL *handle, kc_curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode kc_curl_set_post_size(CURL *handle, long size) {
    return curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE, size);
}

static inline long kc_curl_response_code(CURL *handle) {
    long code = 0;
    if (curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK) return 0;
    return code;
}
#endif
