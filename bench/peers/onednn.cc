// oneDNN peer: matmul primitive setup and execution.
#include "peers/onednn.h"

#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace anvil::bench {

struct OneDnnMatmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc a_md, b_md, c_md;
  dnnl::matmul matmul;
};

std::unique_ptr<OneDnnMatmul> OneDnnMatmul::Create(int64_t m, int64_t n, int64_t k, bool trans_a,
                                                   bool trans_b, bool bf16_in, bool bf16_out,
                                                   std::string* error) {
  using dt = dnnl::memory::data_type;
  try {
    auto impl = std::make_unique<Impl>();
    const dt in = bf16_in ? dt::bf16 : dt::f32;
    const dt out = bf16_out ? dt::bf16 : dt::f32;
    // Row-major [rows, cols] with strides; a transposed operand swaps them.
    impl->a_md = dnnl::memory::desc({m, k}, in, trans_a ? dnnl::memory::dims{1, m}
                                                        : dnnl::memory::dims{k, 1});
    impl->b_md = dnnl::memory::desc({k, n}, in, trans_b ? dnnl::memory::dims{1, k}
                                                        : dnnl::memory::dims{n, 1});
    impl->c_md = dnnl::memory::desc({m, n}, out, dnnl::memory::dims{n, 1});
    const dnnl::matmul::desc desc(impl->a_md, impl->b_md, impl->c_md);
    impl->matmul = dnnl::matmul(dnnl::matmul::primitive_desc(desc, impl->engine));
    auto result = std::unique_ptr<OneDnnMatmul>(new OneDnnMatmul());
    result->impl_ = std::move(impl);
    return result;
  } catch (const dnnl::error& e) {
    *error = std::string("oneDNN matmul: ") + e.what();
    return nullptr;
  }
}

OneDnnMatmul::~OneDnnMatmul() = default;

void OneDnnMatmul::Run(const void* a, const void* b, void* c) {
  Impl& s = *impl_;
  dnnl::memory am(s.a_md, s.engine, const_cast<void*>(a));
  dnnl::memory bm(s.b_md, s.engine, const_cast<void*>(b));
  dnnl::memory cm(s.c_md, s.engine, c);
  s.matmul.execute(s.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.stream.wait();
}

struct OneDnnInt8Matmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory::desc a_md, c_md;
  dnnl::memory weights;  // B in the primitive's layout
  dnnl::matmul matmul;
};

std::unique_ptr<OneDnnInt8Matmul> OneDnnInt8Matmul::Create(int64_t m, int64_t n, int64_t k,
                                                           const int8_t* b, const float* scales,
                                                           std::string* error) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  try {
    auto impl = std::make_unique<Impl>();
    impl->a_md = dnnl::memory::desc({m, k}, dt::u8, tag::ab);
    impl->c_md = dnnl::memory::desc({m, n}, dt::f32, tag::ab);
    const dnnl::memory::desc b_any({k, n}, dt::s8, tag::any);
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, std::vector<float>(scales, scales + n));  // per column
    const dnnl::matmul::desc desc(impl->a_md, b_any, impl->c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, impl->engine);
    impl->matmul = dnnl::matmul(pd);
    // The weights reordered once from row-major [k, n].
    dnnl::memory user({{k, n}, dt::s8, tag::ab}, impl->engine, const_cast<int8_t*>(b));
    impl->weights = dnnl::memory(pd.weights_desc(), impl->engine);
    dnnl::reorder(user, impl->weights).execute(impl->stream, user, impl->weights);
    impl->stream.wait();
    auto result = std::unique_ptr<OneDnnInt8Matmul>(new OneDnnInt8Matmul());
    result->impl_ = std::move(impl);
    return result;
  } catch (const dnnl::error& e) {
    *error = std::string("oneDNN int8 matmul: ") + e.what();
    return nullptr;
  }
}

OneDnnInt8Matmul::~OneDnnInt8Matmul() = default;

void OneDnnInt8Matmul::Run(const uint8_t* a, float* c) {
  Impl& s = *impl_;
  dnnl::memory am(s.a_md, s.engine, const_cast<uint8_t*>(a));
  dnnl::memory cm(s.c_md, s.engine, c);
  s.matmul.execute(s.stream,
                   {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, cm}});
  s.stream.wait();
}

void SetOneDnnThreads(int threads) {
  if (auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) {
    set(threads);
  }
}

void CapOneDnnToAvx2() { dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2); }

std::string OneDnnIsa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
  }
}

}  // namespace anvil::bench
