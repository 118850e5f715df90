// SPDX-License-Identifier: Apache-2.0
// What the types promise at compile time — handles that cannot be copied, moves and destructors that cannot throw,
// the element-type trait — and what moved-from handles do at run time: they are empty and safe to use and destroy.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <complex>
#include <type_traits>

using test::TempDir;

// ---------------------------------------------------------------------------------------------- compile time

template <typename H>
constexpr bool is_move_only_handle = !std::is_copy_constructible_v<H> && !std::is_copy_assignable_v<H> &&
                                     std::is_nothrow_move_constructible_v<H> &&
                                     std::is_nothrow_move_assignable_v<H> && std::is_nothrow_destructible_v<H>;
static_assert(is_move_only_handle<ckpt::Vars>, "Vars is a move-only handle");
static_assert(is_move_only_handle<ckpt::Reader>, "Reader is a move-only handle");
static_assert(is_move_only_handle<ckpt::Writer>, "Writer is a move-only handle");
static_assert(is_move_only_handle<ckpt::Manager>, "Manager is a move-only handle");
static_assert(!std::is_copy_constructible_v<ckpt::Storage>, "a Storage is shared, never copied");
static_assert(std::is_abstract_v<ckpt::Storage>, "Storage is implemented by subclasses");
static_assert(std::is_base_of_v<std::runtime_error, ckpt::Error>, "Error is a std::runtime_error");
static_assert(std::is_nothrow_copy_constructible_v<ckpt::Error>, "exceptions copy without throwing");

static_assert(ckpt::dtype_of_v<bool> == ckpt::Dtype::bool_);
static_assert(ckpt::dtype_of_v<signed char> == ckpt::Dtype::int8);
static_assert(ckpt::dtype_of_v<short> == ckpt::Dtype::int16);
static_assert(ckpt::dtype_of_v<int32_t> == ckpt::Dtype::int32);
static_assert(ckpt::dtype_of_v<long long> == ckpt::Dtype::int64);
static_assert(ckpt::dtype_of_v<int64_t> == ckpt::Dtype::int64);
static_assert(ckpt::dtype_of_v<unsigned char> == ckpt::Dtype::uint8);
static_assert(ckpt::dtype_of_v<uint16_t> == ckpt::Dtype::uint16);
static_assert(ckpt::dtype_of_v<unsigned> == ckpt::Dtype::uint32);
static_assert(ckpt::dtype_of_v<uint64_t> == ckpt::Dtype::uint64);
static_assert(ckpt::dtype_of_v<const float> == ckpt::Dtype::float32);
static_assert(ckpt::dtype_of_v<double> == ckpt::Dtype::float64);
static_assert(ckpt::dtype_of_v<std::complex<float>> == ckpt::Dtype::complex64);
static_assert(ckpt::dtype_of_v<std::complex<double>> == ckpt::Dtype::complex128);
static_assert(ckpt::dtype_of_v<ckpt::float16> == ckpt::Dtype::float16);
static_assert(ckpt::dtype_of_v<ckpt::bfloat16> == ckpt::Dtype::bfloat16);
static_assert(ckpt::dtype_of_v<ckpt::float8_e4m3fn> == ckpt::Dtype::float8_e4m3fn);
static_assert(ckpt::dtype_of_v<ckpt::float8_e5m2> == ckpt::Dtype::float8_e5m2);
static_assert(ckpt::dtype_of_v<ckpt::float8_e4m3fnuz> == ckpt::Dtype::float8_e4m3fnuz);
static_assert(ckpt::dtype_of_v<ckpt::float8_e5m2fnuz> == ckpt::Dtype::float8_e5m2fnuz);
static_assert(ckpt::dtype_of_v<ckpt::float8_e8m0fnu> == ckpt::Dtype::float8_e8m0fnu);
static_assert(ckpt::dtype_of_v<ckpt::fixed_bytes<5>> == ckpt::Dtype::bytes);
static_assert(ckpt::dtype_of_v<ckpt::fixed_unicode<5>> == ckpt::Dtype::unicode);
static_assert(ckpt::dtype_of_v<ckpt::raw<5>> == ckpt::Dtype::void_);
static_assert(static_cast<uint32_t>(ckpt::Dtype::void_) == CKPT_VOID);
// Types whose dtype would be a guess are not elements: char's signedness varies, text is not numbers.
static_assert(!ckpt::is_element_v<char> && !ckpt::is_element_v<char32_t> && !ckpt::is_element_v<wchar_t>);
static_assert(!ckpt::is_element_v<long double> && !ckpt::is_element_v<std::string> && !ckpt::is_element_v<void*>);

// A user's own raw type, mapped by specializing the trait.
struct my_half {
    uint16_t bits;
};
template <>
struct ckpt::dtype_of<my_half> {
    static constexpr ckpt::Dtype value = ckpt::Dtype::float16;
};
static_assert(ckpt::is_element_v<my_half>);

// Borrowing a temporary does not compile; borrowing an lvalue does.
template <typename T, typename = void>
struct can_borrow : std::false_type {};
template <typename T>
struct can_borrow<T, std::void_t<decltype(std::declval<ckpt::Vars&>().borrow(std::string(), std::declval<T>()))>>
    : std::true_type {};
static_assert(can_borrow<std::vector<float>&>::value);
static_assert(!can_borrow<std::vector<float>>::value);
static_assert(!can_borrow<const std::vector<float>&&>::value);
static_assert(!can_borrow<float>::value);
static_assert(can_borrow<float&>::value);

// ---------------------------------------------------------------------------------------------------- run time

TEST_CASE("A user's dtype_of specialization is used for its type", "[handles]") {
    ckpt::Vars vars;
    const std::vector<my_half> halves = {{0x3c00}, {0xc000}};
    vars.add("h", halves);
    CHECK(vars.dtype("h") == ckpt::Dtype::float16);
    CHECK(vars.get<my_half>("h")[1].bits == 0xc000);
    CHECK(vars.get<ckpt::float16>("h")[0] == ckpt::float16{0x3c00});
}

TEST_CASE("A moved-from Vars is empty: getters answer as for NULL, changes throw CKPT_EINVAL", "[handles]") {
    ckpt::Vars a;
    a.add("x", 1.5);
    ckpt_vars* raw = a.native();
    ckpt::Vars b(std::move(a));
    CHECK(b.native() == raw);
    CHECK_FALSE(a);
    CHECK(a.native() == nullptr);
    CHECK(a.size() == 0);
    CHECK(a.metadata_count() == 0);
    CHECK_FALSE(a.metadata("k").has_value());
    CHECK_FALSE(a.find("x").has_value());
    CHECK(test::code_of([&] { a.add("y", 2.0); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { a.set_metadata("k", "v"); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { a.index("x"); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { a.get<double>(0); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { ckpt::save("/nonexistent/a.npz", a); }) == CKPT_EINVAL);

    ckpt::Vars c;
    c.add("z", 3);
    c = std::move(b);  // frees c's own collection
    CHECK(c.scalar<double>("x") == 1.5);
    CHECK_FALSE(b);
    a = std::move(c);  // into an empty one
    CHECK(a.contains("x"));
    ckpt::Vars& same = a;
    a = std::move(same);  // a self-move keeps the collection
    CHECK(a.contains("x"));
}

TEST_CASE("Moved-from Reader, Writer and Manager are empty, throw CKPT_EINVAL when used, and destroy quietly",
          "[handles]") {
    TempDir dir;
    ckpt::Vars vars;
    vars.add<float>("w", {1, 2});
    ckpt::save(dir.path("a.npz"), vars);

    ckpt::Reader npz(dir.path("a.npz"));
    ckpt::Reader npz2 = std::move(npz);
    CHECK_FALSE(npz);
    CHECK(npz.size() == 0);
    CHECK(npz2.read<float>("w") == std::vector<float>{1, 2});
    CHECK(test::code_of([&] { npz.read<float>("w"); }) == CKPT_EINVAL);
    std::vector<float> dst(2);
    CHECK(test::code_of([&] { npz.read_into(0, dst.data(), 8); }) == CKPT_EINVAL);

    ckpt::WriterOptions wo;
    wo.kind = ckpt::WriterKind::queue;
    wo.out_dir = dir.path();
    ckpt::Writer writer(wo);
    writer.save("one.bin", [](ckpt::Sink& s) { s.write("1"); });
    ckpt::Writer writer2(std::move(writer));
    CHECK_FALSE(writer);
    CHECK(writer.native() == nullptr);
    CHECK(test::code_of([&] { writer.save("x.bin", [](ckpt::Sink&) {}); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { writer.save_vars("x.npz", vars); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { writer.wait(); }) == CKPT_EINVAL);
    writer2.save("two.bin", [](ckpt::Sink& s) { s.write("2"); });
    writer2.finalize();
    CHECK(test::read_file(dir.path("one.bin")) == "1");
    CHECK(test::read_file(dir.path("two.bin")) == "2");

    ckpt::Manager manager(dir.path("run"));
    ckpt::Manager manager2(std::move(manager));
    CHECK_FALSE(manager);
    CHECK(test::code_of([&] { manager.save(vars, 1); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { manager.list(); }) == CKPT_EINVAL);
    CHECK(test::code_of([&] { manager.wait(); }) == CKPT_EINVAL);
    CHECK_NOTHROW(manager.close());  // closing nothing is fine
    manager2.save(vars, 1);
    CHECK(manager2.list() == std::vector<int64_t>{1});
    // Moving a manager over another closes the other's directory: it can be opened again.
    ckpt::Manager other(dir.path("other"));
    other = std::move(manager2);
    CHECK_NOTHROW(ckpt::Manager(dir.path("other")));
    CHECK(other.list() == std::vector<int64_t>{1});
}

TEST_CASE("Errors carry a code and a message; versions are the headers' and the library's", "[handles]") {
    const ckpt::Error e(CKPT_EBUSY);
    CHECK(e.code() == CKPT_EBUSY);
    CHECK(std::string(e.what()) == ckpt_strerror(CKPT_EBUSY));
    CHECK(std::string(ckpt::Error(CKPT_EIO, "x").what()) == "x");
    CHECK(std::string(ckpt::code_name(CKPT_EMISMATCH)) == ckpt_strerror(CKPT_EMISMATCH));
    CHECK(std::string(ckpt::dtype_name(ckpt::Dtype::float8_e8m0fnu)) == "float8_e8m0fnu");
    CHECK(std::string(ckpt::dtype_name(static_cast<ckpt::Dtype>(999))) == "unknown");
    CHECK(ckpt::dtype_size(ckpt::Dtype::complex128) == 16);
    CHECK(ckpt::dtype_size(ckpt::Dtype::unicode) == 0);
    CHECK(ckpt::version_number() == ckpt::header_version_number);
    CHECK(std::string(ckpt::version_string()) == CKPT_VERSION_STRING);
}
