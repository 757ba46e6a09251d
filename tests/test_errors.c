/* Bad input, table-driven: every case must return the expected status AND leave a message that
 * names the culprit (a substring given in the table). A crash, a wrong status, or a silent or
 * vague message fails the case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moefuse.h"
#include "harness.h" /* seed, PRNG, final line */

/* A small valid layer every weights/forward case starts from, and mutates one thing of. */
enum { E = 4, H = 16, I = 8, K = 2, T = 5 };

typedef struct fixture {
    moe_context_t *ctx;
    moe_layer_spec spec;
    float gate[E * I * H], up[E * I * H], down[E * H * I], router[E * H];
    moe_weights_desc desc;
    moe_weights_t *w;
    float x[T * H], y[T * H];
    int32_t ids[T * K];
    float weights[T * K];
    moe_forward_args args;
    void *workspace;
    size_t workspace_size;
} fixture;

static fixture fx;

static void fixture_desc(void) {
    memset(&fx.desc, 0, sizeof fx.desc);
    fx.desc.layout = MOE_LAYOUT_SEPARATE;
    fx.desc.gate = moe_tensor_3d(fx.gate, MOE_DTYPE_F32, E, I, H);
    fx.desc.up = moe_tensor_3d(fx.up, MOE_DTYPE_F32, E, I, H);
    fx.desc.down = moe_tensor_3d(fx.down, MOE_DTYPE_F32, E, H, I);
    fx.desc.router = moe_tensor_2d(fx.router, MOE_DTYPE_F32, E, H);
}

static void fixture_args(void) {
    moe_forward_args_init(&fx.args);
    fx.args.x = moe_tensor_2d(fx.x, MOE_DTYPE_F32, T, H);
    fx.args.y = moe_tensor_2d(fx.y, MOE_DTYPE_F32, T, H);
    fx.args.topk_ids = moe_tensor_2d(fx.ids, MOE_DTYPE_I32, T, K);
    fx.args.topk_weights = moe_tensor_2d(fx.weights, MOE_DTYPE_F32, T, K);
    fx.args.workspace = fx.workspace;
    fx.args.workspace_size = fx.workspace_size;
}

static int fixture_init(void) {
    if (moe_context_create(MOE_BACKEND_CPU, 0, &fx.ctx) != MOE_STATUS_OK) return 0;
    moe_layer_spec_init(&fx.spec, E, H, I, K);
    float *all[] = {fx.gate, fx.up, fx.down, fx.router, fx.x};
    size_t n[] = {E * I * H, E * I * H, E * H * I, E * H, T * H};
    for (int a = 0; a < 5; a++)
        for (size_t i = 0; i < n[a]; i++) all[a][i] = (float)(rng_uniform() - 0.5);
    for (int t = 0; t < T; t++)
        for (int s = 0; s < K; s++) {
            fx.ids[t * K + s] = (t + s) % E;
            fx.weights[t * K + s] = 0.5f;
        }
    fixture_desc();
    if (moe_weights_create(fx.ctx, &fx.spec, &fx.desc, MOE_FORMAT_F32, &fx.w) != MOE_STATUS_OK) return 0;
    if (moe_forward_workspace_size(fx.ctx, fx.w, T, MOE_FORMAT_F32, &fx.workspace_size) != MOE_STATUS_OK) return 0;
    fx.workspace = malloc(fx.workspace_size ? fx.workspace_size : 1);
    fixture_args();
    return fx.workspace != NULL;
}

/* ---- the cases: each returns the status of the bad call; the table names what it expects ---- */
static moe_context_t *cx(void) { return fx.ctx; }

static moe_status c_ctx_out_null(void) { return moe_context_create(MOE_BACKEND_CPU, 0, NULL); }
static moe_status c_ctx_bad_backend(void) {
    moe_context_t *c = NULL;
    return moe_context_create((moe_backend)7, 0, &c);
}
static moe_status c_threads_negative(void) { return moe_context_set_threads(cx(), -3); }

static moe_status spec_case(void (*mutate)(moe_layer_spec *)) {
    moe_layer_spec s;
    moe_layer_spec_init(&s, 64, 128, 64, 8);
    mutate(&s);
    return moe_layer_spec_validate(cx(), &s);
}
static void m_topk_gt_e(moe_layer_spec *s) { s->top_k = 65; }
static void m_ngroup(moe_layer_spec *s) { s->n_group = 5, s->topk_group = 2; }
static void m_topk_group(moe_layer_spec *s) { s->n_group = 8, s->topk_group = 9; }
static void m_experts_zero(moe_layer_spec *s) { s->num_experts = 0; }
static void m_hidden_negative(moe_layer_spec *s) { s->hidden = -128; }
static void m_hidden_huge(moe_layer_spec *s) { s->hidden = INT64_C(1) << 50; }
static void m_scale_nan(moe_layer_spec *s) { s->routed_scale = NAN; }
static void m_oai_no_limit(moe_layer_spec *s) { s->activation = MOE_ACT_SWIGLU_OAI, s->act_limit = 0; }
static void m_weight_on_input(moe_layer_spec *s) { s->weight_on_input = 1; }
static void m_activation(moe_layer_spec *s) { s->activation = (moe_activation)99; }
static moe_status c_spec_topk(void) { return spec_case(m_topk_gt_e); }
static moe_status c_spec_ngroup(void) { return spec_case(m_ngroup); }
static moe_status c_spec_topk_group(void) { return spec_case(m_topk_group); }
static moe_status c_spec_experts(void) { return spec_case(m_experts_zero); }
static moe_status c_spec_hidden_neg(void) { return spec_case(m_hidden_negative); }
static moe_status c_spec_hidden_huge(void) { return spec_case(m_hidden_huge); }
static moe_status c_spec_scale(void) { return spec_case(m_scale_nan); }
static moe_status c_spec_oai(void) { return spec_case(m_oai_no_limit); }
static moe_status c_spec_woi(void) { return spec_case(m_weight_on_input); }
static moe_status c_spec_act(void) { return spec_case(m_activation); }
static moe_status c_spec_null(void) { return moe_layer_spec_validate(cx(), NULL); }

static moe_status weights_case(moe_format format) {
    moe_weights_t *w = NULL;
    moe_status st = moe_weights_create(cx(), &fx.spec, &fx.desc, format, &w);
    moe_weights_free(w);
    fixture_desc();
    return st;
}
static moe_status c_w_down_shape(void) {
    fx.desc.down.shape[1] = H + 1;
    return weights_case(MOE_FORMAT_F32);
}
static moe_status c_w_gate_dtype(void) {
    fx.desc.gate.dtype = MOE_DTYPE_I32;
    return weights_case(MOE_FORMAT_F32);
}
static moe_status c_w_up_missing(void) {
    fx.desc.up = moe_tensor_none();
    return weights_case(MOE_FORMAT_F32);
}
static moe_status c_w_overlap(void) {
    fx.desc.gate.strides[0] = I * H, fx.desc.gate.strides[1] = 1, fx.desc.gate.strides[2] = 1;
    return weights_case(MOE_FORMAT_F32);
}
static moe_status c_w_format(void) { return weights_case((moe_format)99); }
static moe_status c_w_null_data(void) {
    fx.desc.down.data = NULL;
    return weights_case(MOE_FORMAT_F32);
}

static moe_status forward_case(void) {
    moe_status st = moe_forward(cx(), fx.w, &fx.args);
    fixture_args();
    return st;
}
static moe_status c_f_x_null(void) {
    fx.args.x.data = NULL;
    return forward_case();
}
static moe_status c_f_x_shape(void) {
    fx.args.x.shape[1] = H + 1;
    return forward_case();
}
static moe_status c_f_y_rows(void) {
    fx.args.y.shape[0] = T - 1;
    return forward_case();
}
static moe_status c_f_ids_only(void) {
    fx.args.topk_weights = moe_tensor_none();
    return forward_case();
}
static moe_status c_f_id_range(void) {
    fx.ids[3] = E;
    moe_status st = forward_case();
    fx.ids[3] = 1;
    return st;
}
static moe_status c_f_workspace(void) {
    fx.args.workspace_size = fx.workspace_size / 2;
    return forward_case();
}
static moe_status c_f_act_format(void) {
    fx.args.act_format = MOE_FORMAT_MXFP4;
    return forward_case();
}
static moe_status c_f_x_dtype(void) {
    fx.args.x.dtype = MOE_DTYPE_I32;
    return forward_case();
}
static moe_status c_f_ids_dtype(void) {
    fx.args.topk_ids.dtype = MOE_DTYPE_I64;
    return forward_case();
}
static moe_status c_f_tokens_overflow(void) {
    /* T * k past int32 row ids: refused before anything is touched. */
    fx.args.x.shape[0] = fx.args.y.shape[0] = INT64_C(1) << 31;
    fx.args.topk_ids.shape[0] = fx.args.topk_weights.shape[0] = INT64_C(1) << 31;
    return forward_case();
}
static moe_status c_f_no_router(void) {
    moe_weights_t *w = NULL;
    fx.desc.router = moe_tensor_none();
    moe_status st = moe_weights_create(cx(), &fx.spec, &fx.desc, MOE_FORMAT_F32, &w);
    fixture_desc();
    if (st != MOE_STATUS_OK) return MOE_STATUS_INTERNAL;
    fx.args.topk_ids = moe_tensor_none();
    fx.args.topk_weights = moe_tensor_none();
    st = moe_forward(cx(), w, &fx.args);
    moe_weights_free(w);
    fixture_args();
    return st;
}
static moe_status c_f_weights_null(void) { return moe_forward(cx(), NULL, &fx.args); }
static char config_line[MOE_FORWARD_CONFIG_MAX];
static moe_status c_cfg_buf_null(void) { return moe_forward_config(cx(), fx.w, T, MOE_FORMAT_F32, NULL, 64); }
static moe_status c_cfg_buf_tiny(void) {
    return moe_forward_config(cx(), fx.w, T, MOE_FORMAT_F32, config_line, 8);
}
static moe_status c_cfg_tokens_negative(void) {
    return moe_forward_config(cx(), fx.w, -1, MOE_FORMAT_F32, config_line, sizeof config_line);
}
static moe_status c_backward(void) {
    moe_backward_args b;
    memset(&b, 0, sizeof b);
    return moe_backward(cx(), fx.w, &b);
}

static moe_status c_plan_block(void) {
    int64_t r, b;
    return moe_dispatch_plan_bounds(10, 2, 4, 0, &r, &b);
}
static moe_status c_plan_overflow(void) {
    int64_t r, b;
    return moe_dispatch_plan_bounds(INT64_C(1) << 30, 8, 256, 128, &r, &b);
}
static moe_status c_route_bias(void) {
    moe_layer_spec s;
    moe_layer_spec_init(&s, E, H, I, K);
    s.use_correction_bias = 1;
    float logits[E] = {0};
    int32_t ids[K];
    float w[K];
    return moe_route(cx(), &s, logits, 1, NULL, ids, w);
}

static moe_status c_quant_odd_cols(void) {
    float x[3] = {1, 2, 3};
    uint8_t codes[4], scales[4];
    float ts;
    return moe_quantize(MOE_FORMAT_NVFP4, x, 1, 3, 3, codes, scales, &ts);
}
static moe_status c_format_name(void) {
    moe_format f;
    return moe_format_from_name("fp7", &f);
}

static moe_status c_cfg_garbled(void) {
    moe_model_config c;
    const char *j = "{\"hidden_size\": 2048, \"num_experts\": [1, }";
    return moe_config_parse(cx(), j, strlen(j), &c);
}
static moe_status c_cfg_missing(void) {
    moe_model_config c;
    const char *j = "{\"num_hidden_layers\": 2, \"num_experts\": 8, \"num_experts_per_tok\": 2,"
                    " \"moe_intermediate_size\": 64}";
    return moe_config_parse(cx(), j, strlen(j), &c);
}
static moe_status c_cfg_file(void) {
    moe_model_config c;
    return moe_config_load(cx(), "/nonexistent/moefuse/config.json", &c);
}
static moe_status c_preset(void) {
    moe_model_config c;
    return moe_config_preset(cx(), "deepseek-v9", &c);
}

static char tmpdir[64];
static moe_status open_bytes(const char *name, const void *bytes, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return MOE_STATUS_INTERNAL;
    fwrite(bytes, 1, n, f);
    fclose(f);
    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(cx(), path, &ck);
    moe_checkpoint_close(ck);
    return st;
}
static moe_status c_st_missing(void) {
    moe_checkpoint_t *ck = NULL;
    return moe_checkpoint_open(cx(), "/nonexistent/moefuse/model.safetensors", &ck);
}
static moe_status c_st_truncated(void) { return open_bytes("trunc.safetensors", "\x10\x00\x00", 3); }
static moe_status c_st_lying(void) {
    /* The header claims 8 bytes of f32 data at [0, 8) but the file holds none. */
    const char *json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char buf[128];
    uint64_t n = strlen(json);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, json, n);
    return open_bytes("lying.safetensors", buf, 8 + n);
}
static moe_status c_st_header_len(void) {
    unsigned char buf[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, '{', '}'};
    return open_bytes("hugelen.safetensors", buf, 10);
}

typedef struct error_case {
    const char *name;
    moe_status (*run)(void);
    moe_status expect;
    const char *message_mentions; /* case-sensitive substring of moe_last_error */
    int uses_thread_error;        /* the call took no context: read moe_last_error(NULL) */
} error_case;

static const error_case cases[] = {
    {"context out NULL", c_ctx_out_null, MOE_STATUS_NULL_POINTER, "out", 1},
    {"context bad backend", c_ctx_bad_backend, MOE_STATUS_INVALID_ARGUMENT, "backend", 1},
    {"threads negative", c_threads_negative, MOE_STATUS_INVALID_ARGUMENT, "threads", 0},
    {"spec top_k > E", c_spec_topk, MOE_STATUS_INVALID_ARGUMENT, "top_k", 0},
    {"spec n_group not dividing E", c_spec_ngroup, MOE_STATUS_INVALID_ARGUMENT, "n_group", 0},
    {"spec topk_group > n_group", c_spec_topk_group, MOE_STATUS_INVALID_ARGUMENT, "topk_group", 0},
    {"spec zero experts", c_spec_experts, MOE_STATUS_INVALID_ARGUMENT, "num_experts", 0},
    {"spec negative hidden", c_spec_hidden_neg, MOE_STATUS_INVALID_ARGUMENT, "hidden", 0},
    {"spec overflowing hidden", c_spec_hidden_huge, MOE_STATUS_OVERFLOW, "hidden", 0},
    {"spec NaN routed_scale", c_spec_scale, MOE_STATUS_INVALID_ARGUMENT, "routed_scale", 0},
    {"spec swiglu-oai without limit", c_spec_oai, MOE_STATUS_INVALID_ARGUMENT, "act_limit", 0},
    {"spec weight_on_input with k=8", c_spec_woi, MOE_STATUS_INVALID_ARGUMENT, "weight_on_input", 0},
    {"spec unknown activation", c_spec_act, MOE_STATUS_INVALID_ARGUMENT, "activation", 0},
    {"spec NULL", c_spec_null, MOE_STATUS_NULL_POINTER, "spec", 0},
    {"weights down shape", c_w_down_shape, MOE_STATUS_SHAPE_MISMATCH, "down", 0},
    {"weights gate dtype", c_w_gate_dtype, MOE_STATUS_DTYPE_MISMATCH, "gate", 0},
    {"weights up missing", c_w_up_missing, MOE_STATUS_NULL_POINTER, "up", 0},
    {"weights overlapping strides", c_w_overlap, MOE_STATUS_SHAPE_MISMATCH, "overlap", 0},
    {"weights unknown format", c_w_format, MOE_STATUS_INVALID_ARGUMENT, "format", 0},
    {"weights NULL data", c_w_null_data, MOE_STATUS_NULL_POINTER, "down", 0},
    {"forward x NULL", c_f_x_null, MOE_STATUS_NULL_POINTER, "x", 0},
    {"forward x shape", c_f_x_shape, MOE_STATUS_SHAPE_MISMATCH, "x", 0},
    {"forward y rows", c_f_y_rows, MOE_STATUS_SHAPE_MISMATCH, "y", 0},
    {"forward ids without weights", c_f_ids_only, MOE_STATUS_INVALID_ARGUMENT, "topk_weights", 0},
    {"forward id out of range", c_f_id_range, MOE_STATUS_INVALID_ARGUMENT, "topk_ids", 0},
    {"forward workspace small", c_f_workspace, MOE_STATUS_WORKSPACE_TOO_SMALL, "workspace", 0},
    {"forward act_format mxfp4", c_f_act_format, MOE_STATUS_UNSUPPORTED, "act_format", 0},
    {"forward x dtype i32", c_f_x_dtype, MOE_STATUS_DTYPE_MISMATCH, "x", 0},
    {"forward ids dtype i64", c_f_ids_dtype, MOE_STATUS_DTYPE_MISMATCH, "topk_ids", 0},
    {"forward T*k past int32", c_f_tokens_overflow, MOE_STATUS_OVERFLOW, "2^31", 0},
    {"forward no routing source", c_f_no_router, MOE_STATUS_INVALID_ARGUMENT, "router", 0},
    {"forward weights NULL", c_f_weights_null, MOE_STATUS_NULL_POINTER, "w is NULL", 0},
    {"forward_config buf NULL", c_cfg_buf_null, MOE_STATUS_NULL_POINTER, "buf is NULL", 0},
    {"forward_config buf_size 8", c_cfg_buf_tiny, MOE_STATUS_INVALID_ARGUMENT, "buf_size = 8, expected >= ", 0},
    {"forward_config num_tokens -1", c_cfg_tokens_negative, MOE_STATUS_INVALID_ARGUMENT, "num_tokens = -1", 0},
    {"backward not implemented", c_backward, MOE_STATUS_UNSUPPORTED, "backward", 0},
    {"plan block 0", c_plan_block, MOE_STATUS_INVALID_ARGUMENT, "block", 1},
    {"plan T*k overflow", c_plan_overflow, MOE_STATUS_OVERFLOW, "int32", 1},
    {"route missing correction bias", c_route_bias, MOE_STATUS_NULL_POINTER, "correction_bias", 0},
    {"nvfp4 odd columns", c_quant_odd_cols, MOE_STATUS_INVALID_ARGUMENT, "cols", 1},
    {"unknown format name", c_format_name, MOE_STATUS_INVALID_ARGUMENT, "fp7", 1},
    {"config garbled JSON", c_cfg_garbled, MOE_STATUS_PARSE_ERROR, "JSON", 0},
    {"config missing hidden_size", c_cfg_missing, MOE_STATUS_INVALID_ARGUMENT, "hidden_size", 0},
    {"config file missing", c_cfg_file, MOE_STATUS_IO_ERROR, "/nonexistent/moefuse/config.json", 0},
    {"preset unknown", c_preset, MOE_STATUS_NOT_FOUND, "deepseek-v9", 0},
    {"safetensors missing file", c_st_missing, MOE_STATUS_IO_ERROR, "/nonexistent/moefuse", 0},
    {"safetensors truncated", c_st_truncated, MOE_STATUS_PARSE_ERROR, "trunc.safetensors", 0},
    {"safetensors lying offsets", c_st_lying, MOE_STATUS_PARSE_ERROR, "lying.safetensors", 0},
    {"safetensors huge header length", c_st_header_len, MOE_STATUS_PARSE_ERROR, "header", 0},
};

int main(void) {
    harness_seed("test_errors");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/moefuse-errors-XXXXXX");
    if (!mkdtemp(tmpdir) || !fixture_init()) {
        printf("fixture setup failed: %s\n0 passed, 1 failed\n", moe_last_error(fx.ctx));
        return 1;
    }
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const error_case *c = &cases[i];
        moe_status st = c->run();
        const char *msg = moe_last_error(c->uses_thread_error ? NULL : fx.ctx);
        int ok = st == c->expect && msg && strstr(msg, c->message_mentions) != NULL;
        printf("%s %-34s status %-28s message: %s\n", ok ? "PASS" : "FAIL", c->name, moe_status_string(st),
               msg ? msg : "(null)");
        if (!ok)
            printf("     expected %s with a message mentioning \"%s\"\n", moe_status_string(c->expect),
                   c->message_mentions);
        ok ? passed++ : failed++;
    }
    /* NaN input is not an error: it propagates to its own token's output and nowhere else. */
    fx.x[2 * H + 3] = NAN;
    moe_status st = moe_forward(fx.ctx, fx.w, &fx.args);
    int nan_ok = st == MOE_STATUS_OK;
    for (int t = 0; t < T && nan_ok; t++)
        for (int h = 0; h < H; h++)
            if ((t == 2) != (isnan(fx.y[t * H + h]) != 0)) nan_ok = 0;
    printf("%s NaN in x[2] propagates to y[2] only (status %s)\n", nan_ok ? "PASS" : "FAIL", moe_status_string(st));
    nan_ok ? passed++ : failed++;

    /* moe_forward_config's size contract: the size its message asks for is exactly the line
     * plus its NUL; one byte less is refused. */
    int need = 0;
    moe_status small = moe_forward_config(fx.ctx, fx.w, T, MOE_FORMAT_F32, config_line, 8);
    const char *msg = moe_last_error(fx.ctx);
    const char *at = msg ? strstr(msg, "expected >= ") : NULL;
    if (at) need = atoi(at + strlen("expected >= "));
    int size_ok = small == MOE_STATUS_INVALID_ARGUMENT && need > 8 && need <= MOE_FORWARD_CONFIG_MAX;
    if (size_ok) {
        moe_status exact = moe_forward_config(fx.ctx, fx.w, T, MOE_FORMAT_F32, config_line, (size_t)need);
        size_ok = exact == MOE_STATUS_OK && (int)strlen(config_line) == need - 1 &&
                  !strncmp(config_line, "backend=cpu T=5 ", 16);
        size_ok = size_ok && moe_forward_config(fx.ctx, fx.w, T, MOE_FORMAT_F32, config_line, (size_t)need - 1) ==
                                 MOE_STATUS_INVALID_ARGUMENT;
    }
    printf("%s forward_config writes a line of exactly the size it asks for (%d bytes): %s\n",
           size_ok ? "PASS" : "FAIL", need, size_ok ? "" : (msg ? msg : "(null)"));
    size_ok ? passed++ : failed++;

    /* Every status has its own string. */
    for (int a = 0; a < MOE_STATUS_COUNT_; a++)
        for (int b = a + 1; b < MOE_STATUS_COUNT_; b++)
            if (!strcmp(moe_status_string((moe_status)a), moe_status_string((moe_status)b))) {
                printf("FAIL status %d and %d share a string\n", a, b);
                failed++;
            }
    free(fx.workspace);
    moe_weights_free(fx.w);
    moe_context_free(fx.ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
    return harness_finish(passed, failed);
}
