/* moefuse models: the built-in presets, one per line with their MoE layer's shape. */
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: moefuse models [--json]\n\n"
            "Lists the built-in model presets (names for --model) with their MoE layer's shape:\n"
            "E routed experts, k experts per token, H hidden size, I expert intermediate size,\n"
            "and the shared expert width where there is one.\n\n"
            "  --json    one JSON object: {\"models\": [{\"name\", \"experts\", \"top_k\", \"hidden\",\n"
            "            \"intermediate\", \"shared_intermediate\", \"layers\", \"moe_layers\"}, ...]}\n");
}

int cmd_models(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            return cli_fail(2, "models: unknown option '%s' (moefuse models --help)", argv[i]);
        }
    }

    int count = moe_preset_count();
    if (json) printf("{\"models\": [");
    else printf("%-24s %5s %3s %6s %6s %9s %s\n", "model", "E", "k", "H", "I", "shared", "MoE layers");
    for (int i = 0; i < count; i++) {
        const char *name = moe_preset_name(i);
        if (!name) break;
        moe_model_config cfg;
        moe_status st = moe_config_preset(NULL, name, &cfg);
        if (st != MOE_STATUS_OK) {
            if (json) printf("]}\n");
            return cli_fail_status(NULL, st, name);
        }
        const moe_layer_spec *s = &cfg.layer;
        int64_t shared = s->num_shared_experts > 0 ? s->shared_intermediate : 0;
        if (json) {
            printf("%s\n  {\"name\": ", i ? "," : "");
            cli_json_string(stdout, name);
            printf(", \"experts\": %lld, \"top_k\": %lld, \"hidden\": %lld, \"intermediate\": %lld, "
                   "\"shared_intermediate\": %lld, \"layers\": %lld, \"moe_layers\": %lld}",
                   (long long)s->num_experts, (long long)s->top_k, (long long)s->hidden, (long long)s->intermediate,
                   (long long)shared, (long long)cfg.num_layers, (long long)cfg.num_moe_layers);
        } else {
            char shared_text[32] = "-";
            if (shared) snprintf(shared_text, sizeof shared_text, "%lld", (long long)shared);
            printf("%-24s %5lld %3lld %6lld %6lld %9s %lld of %lld\n", name, (long long)s->num_experts,
                   (long long)s->top_k, (long long)s->hidden, (long long)s->intermediate, shared_text,
                   (long long)cfg.num_moe_layers, (long long)cfg.num_layers);
        }
    }
    if (json) printf("\n]}\n");
    return 0;
}
