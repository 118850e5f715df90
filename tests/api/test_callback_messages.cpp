// SPDX-License-Identifier: Apache-2.0
// ckpt_error_set_message: a failing callback's own words reach the error of the ckpt call that made it, once, and
// never explain a later failure they do not belong to.
#include <catch2/catch.hpp>

#include "support/handles.hpp"
#include "support/temp_dir.hpp"

#include <ckpt/ckpt.h>

#include <filesystem>
#include <memory>
#include <string>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using ckpt::testing::new_vars;
using ckpt::testing::TempDir;

namespace {

struct WriterFree {
    void operator()(ckpt_writer* w) const { ckpt_writer_free(w); }
};
using Writer = std::unique_ptr<ckpt_writer, WriterFree>;

Writer new_writer(uint32_t kind) {
    ckpt_writer_options o;
    REQUIRE(ckpt_writer_options_init(&o, CKPT_WRITER_OPTIONS_VERSION) == CKPT_OK);
    o.kind = kind;
    ckpt_writer* w = nullptr;
    REQUIRE(ckpt_writer_new(&w, &o) == CKPT_OK);
    return Writer(w);
}

int fails_with_words(ckpt_sink*, void* words) {
    ckpt_error_set_message(static_cast<const char*>(words));
    return CKPT_EIO;
}

int fails_silently(ckpt_sink*, void*) { return CKPT_EIO; }

int succeeds_after_setting_words(ckpt_sink* sink, void*) {
    ckpt_error_set_message("words that belong to no failure");
    return ckpt_sink_write(sink, "x", 1);
}

size_t occurrences(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
    return n;
}

}  // namespace

TEST_CASE("A save function's own words are the cause in the error, said once", "[capi][errors][writer]") {
    TempDir dir;
    Writer w = new_writer(CKPT_WRITER_SIMPLE);
    char words[] = "ValueError: the disk quota is gone";
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "x.bin", fails_with_words, words, 0) == CKPT_EIO);
    const std::string message = ckpt_error_message();
    CHECK_THAT(message, Contains("x.bin") && EndsWith("the save function failed: ValueError: the disk quota is gone"));
    CHECK(occurrences(message, "quota") == 1);
    CHECK(message.find("storage failure") == std::string::npos);
}

TEST_CASE("A save function that says nothing is named by its code", "[capi][errors][writer]") {
    TempDir dir;
    Writer w = new_writer(CKPT_WRITER_SIMPLE);
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "x.bin", fails_silently, nullptr, 0) == CKPT_EIO);
    CHECK_THAT(ckpt_error_message(), EndsWith("the save function failed: storage failure (-5)"));
}

TEST_CASE("Words a callback left without failing never explain a later failure", "[capi][errors][writer]") {
    TempDir dir;
    Writer w = new_writer(CKPT_WRITER_SIMPLE);
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "a.bin", succeeds_after_setting_words, nullptr, 0) ==
            CKPT_OK);
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "b.bin", fails_silently, nullptr, 0) == CKPT_EIO);
    const std::string message = ckpt_error_message();
    CHECK_THAT(message, EndsWith("the save function failed: storage failure (-5)"));
    CHECK(message.find("no failure") == std::string::npos);
}

TEST_CASE("Words set outside any callback are forgotten by the next ckpt call", "[capi][errors][writer]") {
    TempDir dir;
    Writer w = new_writer(CKPT_WRITER_SIMPLE);
    ckpt_error_set_message("stale words");
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "b.bin", fails_silently, nullptr, 0) == CKPT_EIO);
    CHECK(std::string(ckpt_error_message()).find("stale") == std::string::npos);
    ckpt_error_set_message(nullptr);  // NULL is fine
}

TEST_CASE("A background save's words reach the later call that reports it, which says its own save did not start",
          "[capi][errors][writer][threads]") {
    TempDir dir;
    Writer w = new_writer(CKPT_WRITER_THREAD);
    char words[] = "OSError: bucket refused the upload";
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "a.bin", fails_with_words, words, 0) == CKPT_OK);
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "b.bin", succeeds_after_setting_words, nullptr, 0) ==
            CKPT_EIO);
    const std::string message = ckpt_error_message();
    CHECK_THAT(message, Contains("a.bin: the save function failed: OSError: bucket refused the upload"));
    CHECK_THAT(message, EndsWith("; the save of " + dir.path() + "/b.bin" + " was not started"));
    REQUIRE(ckpt_writer_wait(w.get()) == CKPT_OK);
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/b.bin"));
    // Asked again, the save is done.
    REQUIRE(ckpt_writer_save(w.get(), dir.path().c_str(), "b.bin", succeeds_after_setting_words, nullptr, 0) ==
            CKPT_OK);
    REQUIRE(ckpt_writer_finalize(w.get()) == CKPT_OK);
    CHECK(std::filesystem::file_size(dir.path() + "/b.bin") == 1);
}

namespace {
int refuse_with_words(const char* name, char*, size_t, void*) {
    ckpt_error_set_message((std::string("no rule maps ") + name).c_str());
    return CKPT_EINVAL;
}
}  // namespace

TEST_CASE("A renamer's words say why it refused a name", "[capi][errors][npz]") {
    TempDir dir;
    const std::string path = dir.path() + "/m.npz";
    ckpt::testing::Vars vars = new_vars();
    const int64_t shape[1] = {2};
    const float w[2] = {1, 2};
    REQUIRE(ckpt_vars_add(vars.get(), "w", CKPT_FLOAT32, 1, shape, w, CKPT_COPY) == CKPT_OK);
    REQUIRE(ckpt_save(path.c_str(), vars.get(), nullptr) == CKPT_OK);
    ckpt_options o;
    REQUIRE(ckpt_options_init(&o, CKPT_OPTIONS_VERSION) == CKPT_OK);
    o.rename = refuse_with_words;
    REQUIRE(ckpt_restore(path.c_str(), vars.get(), &o) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("the renamer refused 'w': no rule maps w"));
}
