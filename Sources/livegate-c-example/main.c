/* livegate-c-example: watch one object through livegated and print each change as a JSON line.
 * Licensed under the Apache License, Version 2.0.
 *
 * Usage: livegate-c-example [--socket PATH] [--until-version N] COLLECTION ID
 * Exits 0 after showing a snapshot of version N or more (with --until-version), 1 on any error.
 * It is also the C client's test program: the suite runs it under valgrind against a real daemon. */
#include <livegate.h>

#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct watch {
    long long until_version; /* 0: forever */
    int done;
};

static void on_change(lg_client *client, int64_t token, struct json_object *params, void *userdata) {
    (void)client;
    (void)token;
    struct watch *watch = userdata;
    printf("%s\n", json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN));
    fflush(stdout);
    struct json_object *snapshot, *version;
    if (watch->until_version > 0 && json_object_object_get_ex(params, "snapshot", &snapshot) &&
        json_object_object_get_ex(snapshot, "version", &version) && json_object_get_int64(version) >= watch->until_version)
        watch->done = 1;
}

int main(int argc, char **argv) {
    const char *socket_path = NULL;
    struct watch watch = {0, 0};
    int arg = 1;
    for (; arg < argc && strncmp(argv[arg], "--", 2) == 0; arg += 2) {
        if (arg + 1 >= argc) break;
        if (strcmp(argv[arg], "--socket") == 0) socket_path = argv[arg + 1];
        else if (strcmp(argv[arg], "--until-version") == 0) watch.until_version = atoll(argv[arg + 1]);
        else break;
    }
    if (argc - arg != 2) {
        fprintf(stderr, "usage: %s [--socket PATH] [--until-version N] COLLECTION ID\n", argv[0]);
        return 1;
    }

    char *error = NULL;
    lg_client *client = lg_connect(socket_path, "livegate-c-example", &error);
    if (!client) {
        fprintf(stderr, "livegate-c-example: %s\n", error ? error : "cannot connect");
        free(error);
        return 1;
    }
    int64_t token = lg_observe_object(client, argv[arg], argv[arg + 1], 0, on_change, &watch);
    if (token < 0) {
        fprintf(stderr, "livegate-c-example: %s\n", lg_last_error(client));
        lg_disconnect(client);
        return 1;
    }
    int status = 0;
    struct pollfd descriptor = {.fd = lg_fd(client), .events = POLLIN};
    while (!watch.done) {
        if (!lg_has_pending(client) && poll(&descriptor, 1, -1) < 0) {
            status = 1;
            break;
        }
        if (lg_dispatch(client) < 0) {
            fprintf(stderr, "livegate-c-example: %s\n", lg_last_error(client));
            status = 1;
            break;
        }
    }
    if (status == 0 && lg_invalidate(client, token) < 0) {
        fprintf(stderr, "livegate-c-example: %s\n", lg_last_error(client));
        status = 1;
    }
    lg_disconnect(client);
    return status;
}
