/* Helpers shared by the moefuse commands: option matching, strict number parsing, memory
 * queries, JSON output, model loading. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

int cli_option(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        if (!**value) {
            *value = NULL;
            cli_fail(2, "%s needs a value", name);
        }
        return 1;
    }
    if (arg[n] != '\0') return 0; /* a longer option that starts with the same letters */
    /* "--model --json" is a forgotten value, not a model called "--json". */
    if (*i + 1 >= argc || (argv[*i + 1][0] == '-' && argv[*i + 1][1] == '-')) {
        *value = NULL;
        cli_fail(2, "%s needs a value", name);
        return 1;
    }
    *i += 1;
    *value = argv[*i];
    return 1;
}

int cli_parse_int64(const char *opt, const char *text, int64_t min, int64_t max, int64_t *out) {
    char *end = NULL;
    errno = 0;
    /* strtoll skips leading blanks; a number given on the command line has none. */
    if (!text[0] || isspace((unsigned char)text[0]))
        return cli_fail(2, "%s: '%s' is not an integer", opt, text);
    long long v = strtoll(text, &end, 10);
    if (*end != '\0') return cli_fail(2, "%s: '%s' is not an integer", opt, text);
    if (errno == ERANGE || v > max)
        return cli_fail(2, "%s: %s is too large (at most %lld)", opt, text, (long long)max);
    if (v < min) return cli_fail(2, "%s: %s is too small (at least %lld)", opt, text, (long long)min);
    *out = (int64_t)v;
    return 0;
}

int cli_parse_uint64(const char *opt, const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    /* strtoull accepts "-1" (as 2^64-1) and leading blanks: refuse both. */
    if (!isdigit((unsigned char)text[0])) return cli_fail(2, "%s: '%s' is not a non-negative integer", opt, text);
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0') return cli_fail(2, "%s: '%s' is not a non-negative integer", opt, text);
    if (errno == ERANGE) return cli_fail(2, "%s: %s is too large (at most 2^64-1)", opt, text);
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_size(const char *opt, const char *text, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    if (!isdigit((unsigned char)text[0]))
        return cli_fail(2, "%s: '%s' is not a size (examples: 24G, 512M, 1.5T)", opt, text);
    double v = strtod(text, &end);
    if (errno == ERANGE || !isfinite(v))
        return cli_fail(2, "%s: '%s' is not a size (examples: 24G, 512M, 1.5T)", opt, text);
    double unit = 1.0;
    switch (toupper((unsigned char)*end)) {
    case 'K': unit = 1024.0; end++; break;
    case 'M': unit = 1024.0 * 1024.0; end++; break;
    case 'G': unit = 1024.0 * 1024.0 * 1024.0; end++; break;
    case 'T': unit = 1024.0 * 1024.0 * 1024.0 * 1024.0; end++; break;
    default: break;
    }
    /* Accept "G", "GB", "GiB" alike: sizes here are always binary. */
    if (unit > 1.0 && toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B') end += 2;
    else if (toupper((unsigned char)end[0]) == 'B') end++;
    if (*end != '\0') return cli_fail(2, "%s: '%s' is not a size (examples: 24G, 512M, 1.5T)", opt, text);
    double bytes = v * unit;
    if (bytes >= 18446744073709551615.0) return cli_fail(2, "%s: %s is too large", opt, text);
    *out = (uint64_t)bytes;
    return 0;
}

uint64_t cli_memory_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long long kib;
            if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
                fclose(f);
                return (uint64_t)kib * 1024u;
            }
        }
        fclose(f);
    }
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (uint64_t)pages * (uint64_t)page;
#endif
    return 0;
}

char *cli_format_bytes(double bytes, char *buf, size_t size) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 6) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, size, "%.0f B", bytes);
    else snprintf(buf, size, "%.1f %s", bytes, units[u]);
    return buf;
}

/* The length of the well-formed UTF-8 sequence at p (1..4), or 0 (a stray, overlong, surrogate
 * or out-of-range encoding). */
static int utf8_sequence(const unsigned char *p) {
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3 : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] > 0x8F))
        return 0;
    return n;
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = utf8_sequence(p);
        if (n == 0) { /* not UTF-8 (a name from a file): U+FFFD keeps the document valid JSON */
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fwrite(p, 1, (size_t)n, f);
        }
        p += n;
    }
    fputc('"', f);
}

void cli_json_number(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

int cli_fail_status(const moe_context_t *ctx, moe_status status, const char *what) {
    const char *detail = moe_last_error(ctx);
    if (!detail || !detail[0]) detail = moe_last_error(NULL);
    if (detail && detail[0]) return cli_fail(1, "%s: %s: %s", what, moe_status_string(status), detail);
    return cli_fail(1, "%s: %s", what, moe_status_string(status));
}

int cli_print_config_wanted(int flag) {
    const char *env = getenv("MOEFUSE_PRINT_CONFIG");
    return flag || (env && !strcmp(env, "1"));
}

int cli_forward_config(moe_context_t *ctx, const cli_layer *l, int64_t tokens, char *buf, size_t size) {
    moe_status st = moe_forward_config(ctx, l->weights, tokens, l->dtype->acts, buf, size);
    return st == MOE_STATUS_OK ? 0 : cli_fail_status(ctx, st, "moe_forward_config");
}

/* "a, b, c, ..." of the first few presets, for messages. */
static void preset_list(char *buf, size_t size, int max_names) {
    buf[0] = '\0';
    int n = moe_preset_count();
    for (int i = 0; i < n && i < max_names; i++) {
        const char *name = moe_preset_name(i);
        if (!name) break;
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s%s", i ? ", " : "", name);
    }
    if (n > max_names) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, ", ...");
    }
}

int cli_load_model(moe_context_t *ctx, const char *model, const char *config, moe_model_config *out) {
    if (model && config) return cli_fail(2, "give --model or --config, not both");
    if (!model && !config) return cli_fail(2, "give --model NAME (moefuse models lists them) or --config PATH");
    moe_status st;
    if (model) {
        st = moe_config_preset(ctx, model, out);
        if (st == MOE_STATUS_NOT_FOUND || st == MOE_STATUS_INVALID_ARGUMENT) {
            char names[512];
            preset_list(names, sizeof names, 6);
            return cli_fail(2, "unknown model '%s' (known: %s; moefuse models lists all)", model, names);
        }
        if (st != MOE_STATUS_OK) return cli_fail_status(ctx, st, model);
        return 0;
    }
    st = moe_config_load(ctx, config, out);
    if (st != MOE_STATUS_OK) {
        char what[1100];
        snprintf(what, sizeof what, "--config %s", config);
        return cli_fail_status(ctx, st, what);
    }
    return 0;
}

char *cli_layer_runs(const moe_model_config *cfg, char *buf, size_t size) {
    buf[0] = '\0';
    int64_t n = cfg->num_layers;
    if (n > MOE_MAX_LAYERS) n = MOE_MAX_LAYERS;
    if (n <= 0) {
        snprintf(buf, size, "none");
        return buf;
    }
    if (cfg->num_moe_layers == n || cfg->num_moe_layers == 0) {
        snprintf(buf, size, "all %lld %s", (long long)n, cfg->num_moe_layers ? "MoE" : "dense");
        return buf;
    }
    /* Interleaved models (Llama-4 Maverick: every other layer) would make a long list of
     * runs; say the period instead. */
    int64_t runs = 1;
    for (int64_t i = 1; i < n; i++) runs += (cfg->layer_is_moe[i] != 0) != (cfg->layer_is_moe[i - 1] != 0);
    if (runs > 6) {
        int64_t first = 0;
        while (first < n && !cfg->layer_is_moe[first]) first++;
        int64_t step = 1;
        while (first + step < n && !cfg->layer_is_moe[first + step]) step++;
        int periodic = 1;
        for (int64_t i = 0; i < n; i++)
            if ((cfg->layer_is_moe[i] != 0) != (i >= first && (i - first) % step == 0)) periodic = 0;
        if (periodic) {
            snprintf(buf, size, "MoE every %lld layers from %lld (%lld of %lld), the others dense", (long long)step,
                     (long long)first, (long long)cfg->num_moe_layers, (long long)n);
            return buf;
        }
    }
    static const char more[] = ", ... (the rest in --json's moe_layer_ids)";
    for (int64_t start = 0; start < n;) {
        int kind = cfg->layer_is_moe[start] != 0;
        int64_t end = start;
        while (end + 1 < n && (cfg->layer_is_moe[end + 1] != 0) == kind) end++;
        char piece[64];
        if (end == start)
            snprintf(piece, sizeof piece, "%s%lld %s", start ? ", " : "", (long long)start, kind ? "MoE" : "dense");
        else
            snprintf(piece, sizeof piece, "%s%lld-%lld %s", start ? ", " : "", (long long)start, (long long)end,
                     kind ? "MoE" : "dense");
        size_t used = strlen(buf);
        if (used + strlen(piece) + (end + 1 < n ? sizeof more : 1) > size) { /* whole runs only, never cut mid-word */
            if (used + sizeof more <= size) memcpy(buf + used, more, sizeof more);
            break;
        }
        memcpy(buf + used, piece, strlen(piece) + 1);
        start = end + 1;
    }
    return buf;
}

void cli_json_float(FILE *f, float v) {
    /* 7 significant digits: a float's own precision, so 1.702f prints as 1.702. */
    if (isfinite(v)) fprintf(f, "%.7g", (double)v);
    else fputs("null", f);
}

/* ---------------------------------------------------------------------------------------
 * Device memory for --backend cuda, through the CUDA driver API loaded at run time, so the
 * tool builds without the CUDA toolkit and runs without a GPU. It works in device 0's
 * primary context: the one the CUDA runtime inside libmoefuse uses.
 * ------------------------------------------------------------------------------------- */
typedef int cu_result; /* CUresult; 0 is CUDA_SUCCESS */
typedef unsigned long long cu_ptr; /* CUdeviceptr on 64-bit hosts */

static struct {
    void *lib;
    cu_result (*init)(unsigned);
    cu_result (*device_get)(int *, int);
    cu_result (*primary_ctx_retain)(void **, int);
    cu_result (*ctx_set_current)(void *);
    cu_result (*mem_alloc)(cu_ptr *, size_t);
    cu_result (*mem_free)(cu_ptr);
    cu_result (*htod)(cu_ptr, const void *, size_t);
    cu_result (*dtoh)(void *, cu_ptr, size_t);
    cu_result (*sync)(void);
    cu_result (*mem_info)(size_t *, size_t *);
    cu_result (*error_string)(cu_result, const char **);
    /* For bench's timing; looked up without failing open(), as older drivers may lack some. */
    cu_result (*device_name)(char *, int, int);
    cu_result (*stream_create)(void **, unsigned);
    cu_result (*stream_destroy)(void *);
    cu_result (*stream_sync)(void *);
    cu_result (*begin_capture)(void *, int);
    cu_result (*end_capture)(void *, void **);
    cu_result (*graph_instantiate)(void **, void *, unsigned long long);
    cu_result (*graph_launch)(void *, void *);
    cu_result (*graph_exec_destroy)(void *);
    cu_result (*graph_destroy)(void *);
    cu_result (*event_create)(void **, unsigned);
    cu_result (*event_record)(void *, void *);
    cu_result (*event_sync)(void *);
    cu_result (*event_elapsed)(float *, void *, void *);
    cu_result (*event_destroy)(void *);
    int device;
    char error[256];
} cu;

static int cu_failed(const char *what, cu_result r) {
    const char *text = NULL;
    if (cu.error_string) cu.error_string(r, &text);
    snprintf(cu.error, sizeof cu.error, "%s: CUDA error %d (%s)", what, r, text ? text : "unknown");
    return 1;
}

const char *cli_device_error(void) { return cu.error; }

int cli_device_open(int device) {
    if (cu.lib) return 0;
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(cu.error, sizeof cu.error, "cannot load the CUDA driver (libcuda.so.1)");
        return 1;
    }
    struct {
        const char *name;
        void **slot;
    } symbols[] = {
        {"cuInit", (void **)&cu.init},
        {"cuDeviceGet", (void **)&cu.device_get},
        {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_ctx_retain},
        {"cuCtxSetCurrent", (void **)&cu.ctx_set_current},
        {"cuMemAlloc_v2", (void **)&cu.mem_alloc},
        {"cuMemFree_v2", (void **)&cu.mem_free},
        {"cuMemcpyHtoD_v2", (void **)&cu.htod},
        {"cuMemcpyDtoH_v2", (void **)&cu.dtoh},
        {"cuCtxSynchronize", (void **)&cu.sync},
        {"cuMemGetInfo_v2", (void **)&cu.mem_info},
        {"cuGetErrorString", (void **)&cu.error_string},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(cu.lib, symbols[i].name);
        if (!*symbols[i].slot) {
            snprintf(cu.error, sizeof cu.error, "the CUDA driver lacks %s", symbols[i].name);
            return 1;
        }
    }
    struct {
        const char *name;
        void **slot;
    } optional[] = {
        {"cuDeviceGetName", (void **)&cu.device_name},
        {"cuStreamCreate", (void **)&cu.stream_create},
        {"cuStreamDestroy_v2", (void **)&cu.stream_destroy},
        {"cuStreamSynchronize", (void **)&cu.stream_sync},
        {"cuStreamBeginCapture_v2", (void **)&cu.begin_capture},
        {"cuStreamEndCapture", (void **)&cu.end_capture},
        {"cuGraphInstantiateWithFlags", (void **)&cu.graph_instantiate},
        {"cuGraphLaunch", (void **)&cu.graph_launch},
        {"cuGraphExecDestroy", (void **)&cu.graph_exec_destroy},
        {"cuGraphDestroy", (void **)&cu.graph_destroy},
        {"cuEventCreate", (void **)&cu.event_create},
        {"cuEventRecord", (void **)&cu.event_record},
        {"cuEventSynchronize", (void **)&cu.event_sync},
        {"cuEventElapsedTime_v2", (void **)&cu.event_elapsed}, /* CUDA 13's name; the old one below */
        {"cuEventDestroy_v2", (void **)&cu.event_destroy},
    };
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        *optional[i].slot = dlsym(cu.lib, optional[i].name);
    if (!cu.event_elapsed) *(void **)&cu.event_elapsed = dlsym(cu.lib, "cuEventElapsedTime");
    cu_result r;
    int dev = 0;
    void *context = NULL;
    if ((r = cu.init(0))) return cu_failed("cuInit", r);
    if ((r = cu.device_get(&dev, device))) return cu_failed("cuDeviceGet", r);
    cu.device = dev;
    if ((r = cu.primary_ctx_retain(&context, dev))) return cu_failed("cuDevicePrimaryCtxRetain", r);
    if ((r = cu.ctx_set_current(context))) return cu_failed("cuCtxSetCurrent", r);
    return 0;
}

uint64_t cli_device_free_memory(void) {
    size_t free_bytes = 0, total = 0;
    if (!cu.mem_info || cu.mem_info(&free_bytes, &total)) return 0;
    return free_bytes;
}

void *cli_device_alloc(size_t bytes) {
    cu_ptr p = 0;
    cu_result r = cu.mem_alloc(&p, bytes ? bytes : 1);
    if (r) {
        cu_failed("cuMemAlloc", r);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

void cli_device_release(void *p) {
    if (p && cu.mem_free) cu.mem_free((cu_ptr)(uintptr_t)p);
}

int cli_copy_to_device(void *dst, const void *src, size_t bytes) {
    cu_result r = bytes ? cu.htod((cu_ptr)(uintptr_t)dst, src, bytes) : 0;
    return r ? cu_failed("cuMemcpyHtoD", r) : 0;
}

int cli_copy_to_host(void *dst, const void *src, size_t bytes) {
    cu_result r = bytes ? cu.dtoh(dst, (cu_ptr)(uintptr_t)src, bytes) : 0;
    return r ? cu_failed("cuMemcpyDtoH", r) : 0;
}

int cli_device_sync(void) {
    cu_result r = cu.sync();
    return r ? cu_failed("cuCtxSynchronize", r) : 0;
}

/* ---- Timing on the GPU (bench): streams, events, CUDA graphs. ---- */
#define CU_NEED(fn, name)                                                                                \
    do {                                                                                                 \
        if (!cu.fn) {                                                                                    \
            snprintf(cu.error, sizeof cu.error, "the CUDA driver lacks %s", name);                      \
            return 1;                                                                                    \
        }                                                                                                \
    } while (0)

int cli_device_name(char *buf, size_t size) {
    CU_NEED(device_name, "cuDeviceGetName");
    cu_result r = cu.device_name(buf, size > 1024 ? 1024 : (int)size, cu.device);
    return r ? cu_failed("cuDeviceGetName", r) : 0;
}

int cli_stream_create(void **stream) {
    CU_NEED(stream_create, "cuStreamCreate");
    cu_result r = cu.stream_create(stream, 1 /* CU_STREAM_NON_BLOCKING */);
    return r ? cu_failed("cuStreamCreate", r) : 0;
}

void cli_stream_destroy(void *stream) {
    if (stream && cu.stream_destroy) cu.stream_destroy(stream);
}

int cli_stream_sync(void *stream) {
    CU_NEED(stream_sync, "cuStreamSynchronize");
    cu_result r = cu.stream_sync(stream);
    return r ? cu_failed("cuStreamSynchronize", r) : 0;
}

int cli_capture_begin(void *stream) {
    CU_NEED(begin_capture, "cuStreamBeginCapture");
    cu_result r = cu.begin_capture(stream, 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */);
    return r ? cu_failed("cuStreamBeginCapture", r) : 0;
}

int cli_capture_end(void *stream, void **graph_exec) {
    *graph_exec = NULL;
    CU_NEED(end_capture, "cuStreamEndCapture");
    CU_NEED(graph_instantiate, "cuGraphInstantiateWithFlags");
    void *graph = NULL;
    cu_result r = cu.end_capture(stream, &graph);
    if (r) return cu_failed("cuStreamEndCapture", r);
    r = cu.graph_instantiate(graph_exec, graph, 0);
    if (cu.graph_destroy) cu.graph_destroy(graph); /* the executable graph keeps what it needs */
    if (r) {
        *graph_exec = NULL;
        return cu_failed("cuGraphInstantiate", r);
    }
    return 0;
}

int cli_graph_launch(void *graph_exec, void *stream) {
    CU_NEED(graph_launch, "cuGraphLaunch");
    cu_result r = cu.graph_launch(graph_exec, stream);
    return r ? cu_failed("cuGraphLaunch", r) : 0;
}

void cli_graph_destroy(void *graph_exec) {
    if (graph_exec && cu.graph_exec_destroy) cu.graph_exec_destroy(graph_exec);
}

int cli_event_create(void **event) {
    CU_NEED(event_create, "cuEventCreate");
    cu_result r = cu.event_create(event, 0 /* CU_EVENT_DEFAULT: timed */);
    return r ? cu_failed("cuEventCreate", r) : 0;
}

int cli_event_record(void *event, void *stream) {
    CU_NEED(event_record, "cuEventRecord");
    cu_result r = cu.event_record(event, stream);
    return r ? cu_failed("cuEventRecord", r) : 0;
}

int cli_event_elapsed_ms(void *start, void *stop, float *ms) {
    CU_NEED(event_sync, "cuEventSynchronize");
    CU_NEED(event_elapsed, "cuEventElapsedTime");
    cu_result r = cu.event_sync(stop);
    if (r) return cu_failed("cuEventSynchronize", r);
    r = cu.event_elapsed(ms, start, stop);
    return r ? cu_failed("cuEventElapsedTime", r) : 0;
}

void cli_event_destroy(void *event) {
    if (event && cu.event_destroy) cu.event_destroy(event);
}
