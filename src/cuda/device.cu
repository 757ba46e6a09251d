// Device discovery for the CUDA backend.
#include <cuda_runtime.h>

extern "C" int moe__cuda_device_count(void) {
    int n = 0;
    // No driver or no GPU both mean "none here"; the error is cleared so it does not leak
    // into the next runtime call.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}
