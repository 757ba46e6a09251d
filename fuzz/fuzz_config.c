/* libFuzzer target: arbitrary bytes into moe_config_parse. The reader must never crash, leak
 * or read past the input; a config it accepts must be consistent. */
#include "moefuse.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    moe_model_config cfg;
    moe_status st = moe_config_parse(NULL, (const char *)data, size, &cfg);
    if (st == MOE_STATUS_OK) {
        int64_t moe_layers = 0;
        if (cfg.num_layers < 1 || cfg.num_layers > MOE_MAX_LAYERS) abort();
        for (int64_t l = 0; l < cfg.num_layers; l++) moe_layers += cfg.layer_is_moe[l] != 0;
        if (moe_layers != cfg.num_moe_layers) abort();
        /* windowed layers carry a span, and none lies past the model's layers */
        int64_t windowed = 0;
        for (int64_t l = 0; l < MOE_MAX_LAYERS; l++) {
            if (cfg.layer_is_windowed[l] && l >= cfg.num_layers) abort();
            windowed += cfg.layer_is_windowed[l] != 0;
        }
        if ((windowed > 0) != (cfg.attention_window > 0) || cfg.attention_window < 0) abort();
        if (moe_layer_spec_validate(NULL, &cfg.layer) != MOE_STATUS_OK) abort();
    } else if (moe_last_error(NULL)[0] == '\0') {
        abort(); /* every failure carries a message */
    }
    return 0;
}
