/* livegate-c-example: watch one object, or a query's result, through livegated and print each change as a
 * JSON line. Licensed under the Apache License, Version 2.0.
 *
 * Usage: livegate-c-example [--socket PATH] [--until-version N] [--reconnect 1] COLLECTION ID
 *        livegate-c-example [--socket PATH] [--query JSON] [--page-size N] [--pages N] [--until-size N] COLLECTION
 *        livegate-c-example [--socket PATH] --stream NAME [--follow USER] [--post JSON] [--until-count N]
 * An object: exits 0 after showing a snapshot of version N or more (with --until-version).
 * A collection: prints {"ids": [...], "count": ...} after each change; asks for pages until the window holds
 * --pages pages (or no more exist); exits 0 once the window holds N items (with --until-size).
 * With --reconnect 1, a daemon restart is ridden out: it reconnects (every 100 ms, for up to 30 s) and goes on.
 * A stream: listens to the messages sent to the daemon's user (or follows USER's posts), posts JSON once
 * listening (with --post), prints each message's params, exits 0 after N messages. 1 on any error.
 * It is also the C client's test program: the suite runs it under valgrind against a real daemon. */
#include <livegate.h>

#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct watch {
    long long until_version; /* 0: forever */
    long long until_size;    /* collections: stop at this many items; -1: forever */
    int loaded, has_next;    /* collections: the last change was a completed load; more pages follow */
    long long until_count;   /* streams: stop after this many messages; 0: forever */
    long long count;
    int done;
};

static void on_stream(lg_client *client, int64_t token, const char *method, struct json_object *params,
                      void *userdata) {
    (void)client;
    (void)token;
    struct watch *watch = userdata;
    printf("%s %s\n", method, json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN));
    fflush(stdout);
    if (strcmp(method, "stream.message") == 0 && ++watch->count == watch->until_count) watch->done = 1;
}

static void on_collection_change(lg_client *client, int64_t token, struct json_object *params,
                                 struct json_object *window, void *userdata) {
    struct watch *watch = userdata;
    struct json_object *line = json_object_new_object(), *ids = json_object_new_array(), *count, *id, *value;
    watch->loaded = json_object_object_get_ex(params, "loadingStatus", &value) &&
                    strcmp(json_object_get_string(value), "loaded") == 0;
    watch->has_next = json_object_object_get_ex(params, "hasNext", &value) && json_object_get_boolean(value);
    for (size_t i = 0; i < lg_collection_size(client, token); i++) {
        struct json_object *item = lg_collection_item(client, token, i);
        if (json_object_object_get_ex(item, "id", &id)) json_object_array_add(ids, json_object_get(id));
    }
    json_object_object_add(line, "ids", ids);
    if (json_object_object_get_ex(params, "count", &count)) json_object_object_add(line, "count", json_object_get(count));
    json_object_object_add(line, "size", json_object_new_int64((int64_t)json_object_array_length(window)));
    printf("%s\n", json_object_to_json_string_ext(line, JSON_C_TO_STRING_PLAIN));
    fflush(stdout);
    json_object_put(line);
    if (watch->until_size >= 0 && (long long)json_object_array_length(window) >= watch->until_size) watch->done = 1;
}

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
    const char *query = NULL;
    int page_size = 0, pages = 1;
    const char *stream = NULL, *follow = NULL, *post = NULL;
    int reconnect = 0;
    struct watch watch = {0, -1, 0, 0, 0, 0, 0};
    int arg = 1;
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("livegate-c-example %s\n", LIVEGATE_VERSION);
        return 0;
    }
    for (; arg < argc && strncmp(argv[arg], "--", 2) == 0; arg += 2) {
        if (arg + 1 >= argc) break;
        if (strcmp(argv[arg], "--socket") == 0) socket_path = argv[arg + 1];
        else if (strcmp(argv[arg], "--until-version") == 0) watch.until_version = atoll(argv[arg + 1]);
        else if (strcmp(argv[arg], "--query") == 0) query = argv[arg + 1];
        else if (strcmp(argv[arg], "--page-size") == 0) page_size = atoi(argv[arg + 1]);
        else if (strcmp(argv[arg], "--pages") == 0) pages = atoi(argv[arg + 1]);
        else if (strcmp(argv[arg], "--until-size") == 0) watch.until_size = atoll(argv[arg + 1]);
        else if (strcmp(argv[arg], "--stream") == 0) stream = argv[arg + 1];
        else if (strcmp(argv[arg], "--follow") == 0) follow = argv[arg + 1];
        else if (strcmp(argv[arg], "--post") == 0) post = argv[arg + 1];
        else if (strcmp(argv[arg], "--until-count") == 0) watch.until_count = atoll(argv[arg + 1]);
        else if (strcmp(argv[arg], "--reconnect") == 0) reconnect = atoi(argv[arg + 1]);
        else break;
    }
    if (stream ? argc != arg : (argc - arg != 2 && argc - arg != 1)) {
        fprintf(stderr,
                "usage: %s [--socket PATH] [--until-version N] COLLECTION ID\n"
                "       %s [--socket PATH] [--query JSON] [--page-size N] [--pages N] [--until-size N] COLLECTION\n"
                "       %s [--socket PATH] --stream NAME [--follow USER] [--post JSON] [--until-count N]\n",
                argv[0], argv[0], argv[0]);
        return 1;
    }
    int is_collection = argc - arg == 1;

    char *error = NULL;
    lg_client *client = lg_connect(socket_path, "livegate-c-example", &error);
    if (!client) {
        fprintf(stderr, "livegate-c-example: %s\n", error ? error : "cannot connect");
        free(error);
        return 1;
    }
    int64_t token = stream          ? lg_stream_listen(client, stream, follow, on_stream, &watch)
                    : is_collection ? lg_observe_collection(client, argv[arg], query, page_size, 0, 0, on_collection_change, &watch)
                                    : lg_observe_object(client, argv[arg], argv[arg + 1], 0, on_change, &watch);
    if (token < 0 || (stream && post && lg_stream_send(client, stream, NULL, post) < 0)) {
        fprintf(stderr, "livegate-c-example: %s\n", lg_last_error(client));
        lg_disconnect(client);
        return 1;
    }
    int pages_asked = 1;
    int status = 0;
    struct pollfd descriptor = {.fd = lg_fd(client), .events = POLLIN};
    while (!watch.done) {
        /* Once a page has loaded and more follow, ask for the next (it arrives as a change). */
        if (is_collection && pages_asked < pages && watch.loaded && watch.has_next) {
            if (lg_collection_page(client, token, LG_PAGE_NEXT) < 0) {
                fprintf(stderr, "livegate-c-example: %s\n", lg_last_error(client));
                status = 1;
                break;
            }
            pages_asked++;
            watch.loaded = 0;
        }
        if (!lg_has_pending(client) && poll(&descriptor, 1, -1) < 0) {
            status = 1;
            break;
        }
        if (lg_dispatch(client) < 0) {
            int back = 0;
            for (int attempt = 0; reconnect && attempt < 300 && !back; attempt++) {
                poll(NULL, 0, 100);
                back = lg_reconnect(client) == 0;
            }
            if (back) {
                descriptor.fd = lg_fd(client);
                continue;
            }
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
