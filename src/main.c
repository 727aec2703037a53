/* profcol command line: run, validate, components (like otelcol). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "pipeline/component.h"
#include "pipeline/config.h"
#include "pipeline/log.h"
#include "pipeline/service.h"

extern const char pc_default_config[];

static void usage(FILE *f)
{
    fprintf(f,
            "usage: profcol [command] [--config FILE]...\n"
            "\n"
            "profcol receives continuous-profiling data (OTLP profiles), processes it in\n"
            "pipelines and exports it, configured like the OpenTelemetry Collector.\n"
            "\n"
            "commands:\n"
            "  (none)       run with the given configs, or the embedded default config\n"
            "  validate     check the configs and exit (0 valid, 1 invalid)\n"
            "  components   list every component type with its settings\n"
            "  print-default-config  print the embedded default config\n"
            "\n"
            "options:\n"
            "  -c, --config FILE   config file; repeat to merge later files over earlier ones\n"
            "  -v, --version       print the version\n"
            "  -h, --help          this help\n"
            "\n"
            "exit status: 0 ok, 1 config or start-up error, 2 usage error\n");
}

static pc_node *load_configs(char **files, size_t n, pc_cfg_err *err)
{
    if (n == 0) return pc_config_parse(pc_default_config, strlen(pc_default_config),
                                       "<embedded default config>", err);
    pc_node *root = NULL;
    for (size_t i = 0; i < n; i++) {
        pc_node *one = pc_config_load_file(files[i], err);
        if (!one) {
            pc_node_free(root);
            return NULL;
        }
        if (!root) root = one;
        else pc_config_merge(root, one);
    }
    return root;
}

static const char *cfg_type_name(pc_cfg_type t)
{
    static const char *const names[] = {"string", "int",  "bool", "duration", "size",
                                        "enum",   "list", "map",  "object"};
    return names[t];
}

static int print_components(void)
{
    for (size_t i = 0; pc_component_types[i]; i++) {
        const pc_component_type *t = pc_component_types[i];
        printf("%s %s [%s]\n  %s\n", pc_kind_name(t->kind), t->name, t->stability, t->doc);
        for (const pc_cfg_key *k = t->cfg; k && k->key; k++) {
            char type[128];
            snprintf(type, sizeof type, "%s", cfg_type_name(k->type));
            if (k->type == PC_CFG_ENUM) {
                size_t n = strlen(type);
                for (int j = 0; k->choices[j] && n < sizeof type - 2; j++)
                    n += (size_t)snprintf(type + n, sizeof type - n, "%s%s", j ? "|" : " ",
                                          k->choices[j]);
            }
            printf("    %-34s %-24s default %-10s %s\n", k->key, type, k->def ? k->def : "-",
                   k->doc);
        }
        printf("\n");
    }
    return 0;
}

typedef struct run_state {
    uv_loop_t *loop;
    pc_service *svc;
    uv_signal_t sigint, sigterm;
    int signals;
} run_state;

static void service_stopped(void *arg)
{
    run_state *st = arg;
    uv_close((uv_handle_t *)&st->sigint, NULL);
    uv_close((uv_handle_t *)&st->sigterm, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    run_state *st = h->data;
    if (st->signals++) {
        /* a second signal means "now" */
        PC_WARN(NULL, "second signal (%d): exiting without draining", signum);
        exit(1);
    }
    PC_INFO(NULL, "received signal %d: stopping", signum);
    pc_service_shutdown(st->svc, service_stopped, st);
}

static int run(char **files, size_t n, int validate_only)
{
    pc_cfg_err err = {{0}};
    pc_node *root = load_configs(files, n, &err);
    if (!root) {
        fprintf(stderr, "profcol: %s\n", err.msg);
        return 1;
    }
    uv_loop_t *loop = uv_default_loop();
    pc_service *svc = pc_service_new(loop, root, &err);
    if (!svc) {
        fprintf(stderr, "profcol: invalid config: %s\n", err.msg);
        return 1;
    }
    if (validate_only) {
        pc_service_free(svc);
        printf("config is valid\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    run_state st = {.loop = loop, .svc = svc};
    uv_signal_init(loop, &st.sigint);
    uv_signal_init(loop, &st.sigterm);
    st.sigint.data = st.sigterm.data = &st;
    uv_signal_start(&st.sigint, on_signal, SIGINT);
    uv_signal_start(&st.sigterm, on_signal, SIGTERM);
    char e[512];
    int rc = 0;
    if (pc_service_start(svc, e, sizeof e)) {
        fprintf(stderr, "profcol: cannot start: %s\n", e);
        rc = 1;
        st.signals = 1;
        pc_service_shutdown(svc, service_stopped, &st);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    pc_service_free(svc);
    uv_loop_close(loop);
    if (!rc) PC_INFO(NULL, "stopped");
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"version", no_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    char **files = calloc((size_t)argc + 1, sizeof(char *));
    size_t nfiles = 0;
    int c;
    while ((c = getopt_long(argc, argv, "c:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'c': files[nfiles++] = optarg; break;
        case 'v': printf("profcol %s\n", PROFCOL_VERSION); free(files); return 0;
        case 'h': usage(stdout); free(files); return 0;
        default: usage(stderr); free(files); return 2;
        }
    }
    int rc;
    const char *cmd = optind < argc ? argv[optind] : NULL;
    if (cmd && optind + 1 < argc) {
        fprintf(stderr, "profcol: unexpected argument \"%s\"\n", argv[optind + 1]);
        rc = 2;
    } else if (!cmd) {
        rc = run(files, nfiles, 0);
    } else if (!strcmp(cmd, "validate")) {
        rc = run(files, nfiles, 1);
    } else if (!strcmp(cmd, "components")) {
        rc = print_components();
    } else if (!strcmp(cmd, "print-default-config")) {
        fputs(pc_default_config, stdout);
        rc = 0;
    } else {
        fprintf(stderr, "profcol: unknown command \"%s\"\n", cmd);
        usage(stderr);
        rc = 2;
    }
    free(files);
    return rc;
}
