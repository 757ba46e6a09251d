/* moefuse info: a model's MoE layer spec and layer structure, in words or as JSON. */
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: moefuse info (--model NAME | --config PATH) [--json]\n\n"
            "Shows what moefuse derives from a model: the MoE layer (experts, top-k, sizes, routing,\n"
            "activation, shared experts), which layers are dense and which MoE, and the attention\n"
            "fields.\n\n"
            "  --model NAME   a built-in preset (moefuse models lists them)\n"
            "  --config PATH  a Hugging Face config.json, or a directory holding one\n"
            "  --json         one JSON object; score is named as config.json's scoring_func\n"
            "                 (softmax, sigmoid, sqrtsoftplus)\n");
}

static const char *yes_no(int v) { return v ? "yes" : "no"; }

/* Layers that attend at most attention_window tokens. */
static int64_t windowed_layers(const moe_model_config *cfg) {
    int64_t count = 0;
    for (int64_t l = 0; l < cfg->num_layers && l < MOE_MAX_LAYERS; l++) count += cfg->layer_is_windowed[l] != 0;
    return cfg->attention_window > 0 ? count : 0;
}

static void print_text(const moe_model_config *cfg) {
    const moe_layer_spec *s = &cfg->layer;
    char runs[512];
    printf("%s", cfg->name);
    if (cfg->model_type[0] && strcmp(cfg->model_type, cfg->name)) printf(" (model_type %s)", cfg->model_type);
    printf("%s\n", cfg->is_moe ? "" : ": a dense model (run as one expert, top-1)");
    printf("  experts        %lld routed, top-%lld per token\n", (long long)s->num_experts, (long long)s->top_k);
    printf("  hidden         %lld\n", (long long)s->hidden);
    printf("  intermediate   %lld per expert\n", (long long)s->intermediate);
    printf("  score          %s%s\n", moe_score_name(s->score),
           s->use_correction_bias ? ", with correction bias (selection only)" : "");
    if (s->n_group > 1)
        printf("  groups         %lld groups of %lld experts, best %lld kept\n", (long long)s->n_group,
               (long long)(s->num_experts / s->n_group), (long long)s->topk_group);
    else
        printf("  groups         none\n");
    printf("  routed scale   %g\n", (double)s->routed_scale);
    printf("  renormalise    %s\n", yes_no(s->renormalize));
    printf("  router bias    %s\n", yes_no(s->router_has_bias));
    printf("  activation     %s", moe_activation_name(s->activation));
    if (s->activation == MOE_ACT_SWIGLU_OAI) printf(" (alpha %g, limit %g)", (double)s->act_alpha, (double)s->act_limit);
    else if (s->act_limit > 0) printf(" (limit %g)", (double)s->act_limit);
    printf("\n");
    printf("  expert biases  %s\n", yes_no(s->expert_has_bias));
    if (s->weight_on_input) printf("  routing weight applied to the expert input\n");
    if (s->num_shared_experts > 0)
        printf("  shared experts %lld, width %lld%s\n", (long long)s->num_shared_experts,
               (long long)s->shared_intermediate, s->shared_gate ? ", sigmoid-gated per token" : "");
    else
        printf("  shared experts none\n");
    printf("  layers         %lld: %s", (long long)cfg->num_layers, cli_layer_runs(cfg, runs, sizeof runs));
    if (cfg->dense_intermediate > 0 && cfg->num_moe_layers < cfg->num_layers)
        printf(" (dense MLP intermediate %lld)", (long long)cfg->dense_intermediate);
    printf("\n");
    printf("  attention      %lld heads, %lld kv heads, head_dim %lld\n", (long long)cfg->num_heads,
           (long long)cfg->num_kv_heads, (long long)cfg->head_dim);
    if (cfg->kv_lora_rank > 0)
        printf("  MLA            q_lora_rank %lld, kv_lora_rank %lld, qk_nope %lld, qk_rope %lld, v_head %lld\n",
               (long long)cfg->q_lora_rank, (long long)cfg->kv_lora_rank, (long long)cfg->qk_nope_head_dim,
               (long long)cfg->qk_rope_head_dim, (long long)cfg->v_head_dim);
    int64_t windowed = windowed_layers(cfg);
    if (windowed > 0)
        printf("  attention span %lld of %lld layers attend at most %lld tokens (sliding window or chunk)\n",
               (long long)windowed, (long long)cfg->num_layers, (long long)cfg->attention_window);
    printf("  vocab          %lld%s\n", (long long)cfg->vocab_size, cfg->tie_word_embeddings ? " (tied embeddings)" : "");
    printf("  dtype          %s\n", moe_dtype_name(cfg->torch_dtype));
}

static void print_json(const moe_model_config *cfg) {
    const moe_layer_spec *s = &cfg->layer;
    printf("{\"name\": ");
    cli_json_string(stdout, cfg->name);
    printf(", \"model_type\": ");
    cli_json_string(stdout, cfg->model_type);
    printf(", \"is_moe\": %s", cfg->is_moe ? "true" : "false");
    printf(", \"experts\": %lld, \"top_k\": %lld, \"hidden\": %lld, \"intermediate\": %lld", (long long)s->num_experts,
           (long long)s->top_k, (long long)s->hidden, (long long)s->intermediate);
    printf(", \"score\": \"%s\", \"correction_bias\": %s", moe_score_name(s->score),
           s->use_correction_bias ? "true" : "false");
    printf(", \"n_group\": %lld, \"topk_group\": %lld", (long long)s->n_group, (long long)s->topk_group);
    printf(", \"routed_scale\": ");
    cli_json_float(stdout, s->routed_scale);
    printf(", \"norm_topk\": %s, \"router_bias\": %s", s->renormalize ? "true" : "false",
           s->router_has_bias ? "true" : "false");
    printf(", \"weight_on_input\": %s", s->weight_on_input ? "true" : "false");
    printf(", \"activation\": \"%s\", \"act_alpha\": ", moe_activation_name(s->activation));
    cli_json_float(stdout, s->act_alpha);
    printf(", \"act_limit\": ");
    cli_json_float(stdout, s->act_limit);
    printf(", \"expert_bias\": %s", s->expert_has_bias ? "true" : "false");
    printf(", \"shared_experts\": %lld, \"shared_intermediate\": %lld, \"shared_gate\": %s",
           (long long)s->num_shared_experts, (long long)(s->num_shared_experts > 0 ? s->shared_intermediate : 0),
           s->shared_gate ? "true" : "false");
    printf(", \"layers\": %lld, \"moe_layers\": %lld, \"moe_layer_ids\": [", (long long)cfg->num_layers,
           (long long)cfg->num_moe_layers);
    int64_t n = cfg->num_layers < MOE_MAX_LAYERS ? cfg->num_layers : MOE_MAX_LAYERS;
    int first = 1;
    for (int64_t i = 0; i < n; i++)
        if (cfg->layer_is_moe[i]) {
            printf("%s%lld", first ? "" : ", ", (long long)i);
            first = 0;
        }
    printf("], \"dense_intermediate\": %lld", (long long)cfg->dense_intermediate);
    printf(", \"num_heads\": %lld, \"num_kv_heads\": %lld, \"head_dim\": %lld, \"vocab_size\": %lld",
           (long long)cfg->num_heads, (long long)cfg->num_kv_heads, (long long)cfg->head_dim,
           (long long)cfg->vocab_size);
    printf(", \"tie_word_embeddings\": %s", cfg->tie_word_embeddings ? "true" : "false");
    printf(", \"q_lora_rank\": %lld, \"kv_lora_rank\": %lld, \"qk_nope_head_dim\": %lld, \"qk_rope_head_dim\": %lld"
           ", \"v_head_dim\": %lld",
           (long long)cfg->q_lora_rank, (long long)cfg->kv_lora_rank, (long long)cfg->qk_nope_head_dim,
           (long long)cfg->qk_rope_head_dim, (long long)cfg->v_head_dim);
    printf(", \"attention_window\": %lld, \"windowed_layer_ids\": [", (long long)cfg->attention_window);
    first = 1;
    for (int64_t i = 0; i < n; i++)
        if (cfg->layer_is_windowed[i]) {
            printf("%s%lld", first ? "" : ", ", (long long)i);
            first = 0;
        }
    printf("], \"torch_dtype\": \"%s\"}\n", moe_dtype_name(cfg->torch_dtype));
}

int cmd_info(int argc, char **argv) {
    const char *model = NULL, *config = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (cli_option(argc, argv, &i, "--model", &v)) {
            if (!v) return 2;
            model = v;
        } else if (cli_option(argc, argv, &i, "--config", &v)) {
            if (!v) return 2;
            config = v;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            return cli_fail(2, "info: unknown option '%s' (moefuse info --help)", argv[i]);
        }
    }
    moe_model_config cfg;
    int rc = cli_load_model(NULL, model, config, &cfg);
    if (rc) return rc;
    if (json) print_json(&cfg);
    else print_text(&cfg);
    return 0;
}
