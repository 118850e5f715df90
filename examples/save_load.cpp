// SPDX-License-Identifier: Apache-2.0
// save_load.cpp: ckpt from C++ (ckpt/ckpt.hpp) — save a model's arrays to an .npz that numpy.load opens, read the
// file back as typed arrays, and restore it in place into the model's own vectors.
//
//     save_load_cpp [path]        (default: model.npz)
#include <ckpt/ckpt.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    const std::string path = argc > 1 ? argv[1] : "model.npz";
    // The model: a 4 -> 2 dense layer in bfloat16 (as accelerators train it), a float32 bias and a step counter.
    std::vector<ckpt::bfloat16> w(4 * 2);
    for (size_t i = 0; i < w.size(); ++i) w[i] = ckpt::bfloat16::from_float(0.25f * static_cast<float>(i) - 1.0f);
    std::vector<float> b = {0.5f, -0.5f};
    int64_t step = 1000;

    try {
        // borrow: no copy is made, and restores write straight back into w, b and step.
        ckpt::Vars vars;
        vars.borrow("dense/w", w, {4, 2});
        vars.borrow("dense/b", b);
        vars.borrow("step", step);
        vars.set_metadata("loss", "0.125");
        ckpt::save(path, vars);  // atomic and durable: the previous file or the complete new one

        // Read the whole file into a new collection; get<T> checks the dtype.
        const ckpt::Vars loaded = ckpt::read(path);
        for (size_t i = 0; i < loaded.size(); ++i)
            std::printf("%-8s %-9s %zu bytes\n", std::string(loaded.name(i)).c_str(), ckpt::dtype_name(loaded.dtype(i)),
                        loaded.nbytes(i));
        std::printf("w[7] = %g, loss %s\n", loaded.get<ckpt::bfloat16>("dense/w")[7].to_float(),
                    std::string(loaded.metadata("loss").value_or("?")).c_str());

        // Training goes on... then restore the saved values in place.
        b[0] = 0.0f;
        step = 0;
        ckpt::restore(path, vars);
        std::printf("restored: step %lld, b[0] = %g\n", static_cast<long long>(step), b[0]);
        return step == 1000 && b[0] == 0.5f ? 0 : 1;
    } catch (const ckpt::Error& e) {
        // e.code() is the CKPT_* code; e.what() names the file, the member and the problem.
        std::fprintf(stderr, "save_load_cpp: %s (%s)\n", e.what(), e.code_name());
        return 1;
    }
}
