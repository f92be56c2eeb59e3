// The smoke image's CUDA program (the role of NVIDIA's cuda-samples vectorAdd in the real smoke image): add two
// vectors on the GPU the container was given and check every element. Compiled on the GPU machine with its nvcc
// (e2e/gpunode/run.sh); prints the device's name and UUID, so each pod's log says which card it ran on.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add(const float *a, const float *b, float *c, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 1 << 20;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    printf("no CUDA device: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  printf("[vectorAdd] device 0: %s, GPU-", prop.name);
  const unsigned char *u = reinterpret_cast<const unsigned char *>(prop.uuid.bytes);
  for (int i = 0; i < 16; i++) printf(i == 4 || i == 6 || i == 8 || i == 10 ? "-%02x" : "%02x", u[i]);
  printf("\n");
  float *a, *b, *c;
  cudaMallocManaged(&a, n * sizeof(float));
  cudaMallocManaged(&b, n * sizeof(float));
  cudaMallocManaged(&c, n * sizeof(float));
  for (int i = 0; i < n; i++) { a[i] = i; b[i] = 2.0f * i; }
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    printf("[vectorAdd] kernel failed: %s\n", cudaGetErrorString(err));
    return 1;
  }
  for (int i = 0; i < n; i++) {
    if (c[i] != 3.0f * i) {
      printf("[vectorAdd] result %d is %f, not %f\nTest FAILED\n", i, c[i], 3.0f * i);
      return 1;
    }
  }
  printf("[vectorAdd] %d elements\nTest PASSED\n", n);
  return 0;
}
