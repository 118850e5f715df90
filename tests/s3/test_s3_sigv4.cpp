// SPDX-License-Identifier: Apache-2.0
// libckpt_s3's SigV4 signing against the examples AWS publishes in its S3 documentation ("Signature Calculations for
// the Authorization Header"), whose canonical requests, strings to sign and signatures are given there, and the
// canonical forms a strict server rebuilds from what it receives.
#include "sigv4.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace ckpt::s3;

namespace {

// The documentation's credentials, bucket and time.
SigningRequest aws_example(const std::string& method, const std::string& path, const std::string& query) {
    SigningRequest r;
    r.method = method;
    r.path = path;
    r.query = query;
    r.amz_date = "20130524T000000Z";
    r.region = "us-east-1";
    r.access_key_id = "AKIAIOSFODNN7EXAMPLE";
    r.secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    r.payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";  // of no bytes
    r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                 {"x-amz-date", r.amz_date},
                 {"x-amz-content-sha256", r.payload_hash}};
    return r;
}

}  // namespace

TEST_CASE("SHA-256 of no bytes and of 'abc' are the standard's") {
    CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("AWS's GET Object example: a ranged GET signs to the documented signature") {
    SigningRequest r = aws_example("GET", "/test.txt", "");
    r.headers.emplace_back("Range", "bytes=0-9");
    CHECK(canonical_request(r) ==
          "GET\n/test.txt\n\n"
          "host:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
          "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
          "x-amz-date:20130524T000000Z\n\n"
          "host;range;x-amz-content-sha256;x-amz-date\n"
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(string_to_sign(r) ==
          "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
          "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    CHECK(authorization(r) ==
          "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
          "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
          "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("AWS's GET Bucket Lifecycle and Get Bucket (List Objects) examples sign to the documented signatures") {
    SECTION("a parameter with no value is signed with its '='") {
        SigningRequest r = aws_example("GET", "/", "lifecycle");
        CHECK(authorization(r).substr(authorization(r).find("Signature=")) ==
              "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    }
    SECTION("parameters are signed sorted, whatever order they came in") {
        SigningRequest r = aws_example("GET", "/", "prefix=J&max-keys=2");
        CHECK(canonical_query(r.query) == "max-keys=2&prefix=J");
        CHECK(authorization(r).substr(authorization(r).find("Signature=")) ==
              "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    }
}

TEST_CASE("Header names are signed in lowercase and sorted, values with their blanks folded") {
    SigningRequest r = aws_example("PUT", "/a%20b/c%2Bd.npz", "uploadId=x%2By&partNumber=2");
    r.headers.emplace_back("Content-Type", "  application/xml \t ");
    r.headers.emplace_back("X-Amz-Meta-Note", "a   b");
    const std::string canonical = canonical_request(r);
    CHECK(canonical ==
          "PUT\n/a%20b/c%2Bd.npz\npartNumber=2&uploadId=x%2By\n"
          "content-type:application/xml\n"
          "host:examplebucket.s3.amazonaws.com\n"
          "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
          "x-amz-date:20130524T000000Z\n"
          "x-amz-meta-note:a b\n\n"
          "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-note\n"
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_THAT(authorization(r),
               Catch::Matchers::Contains("SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
                                         "x-amz-meta-note, "));
}

TEST_CASE("A header that is not given is not signed: the Expect that suppresses 100-continue is never in it") {
    SigningRequest r = aws_example("PUT", "/k", "");
    CHECK(authorization(r).find("expect") == std::string::npos);
    CHECK(canonical_request(r).find("expect") == std::string::npos);
}

TEST_CASE("The canonical query keeps each pair's encoding and gives a bare name its '='") {
    CHECK(canonical_query("") == "");
    CHECK(canonical_query("uploads") == "uploads=");
    CHECK(canonical_query("uploads=") == "uploads=");
    CHECK(canonical_query("prefix=a%2Fb&list-type=2&delimiter=%2F") == "delimiter=%2F&list-type=2&prefix=a%2Fb");
    CHECK(canonical_query("b=2&a=1&&a=0") == "a=0&a=1&b=2");
}

TEST_CASE("x-amz-date is the UTC time in SigV4's basic format") {
    CHECK(amz_date(0) == "19700101T000000Z");
    CHECK(amz_date(1369353600) == "20130524T000000Z");
}

TEST_CASE("Last-Modified: an HTTP-date becomes nanoseconds since the epoch; anything else is refused") {
    using ckpt::s3::http_date_ns;
    CHECK(http_date_ns("Thu, 01 Jan 1970 00:00:00 GMT") == 0);
    CHECK(http_date_ns("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777LL * 1000000000);
    CHECK(http_date_ns("Tue, 29 Feb 2000 23:59:59 GMT") == 951868799LL * 1000000000);
    CHECK(http_date_ns("Thu, 03 Dec 2026 21:41:56 GMT") == 1796334116LL * 1000000000);
    for (const char* bad :
         {"", "Sun, 06 Nov 1994 08:49:37 UTC", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
          "Sun, 06 Nox 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT",
          "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 19x4 08:49:37 GMT", "Sun, 06 ovN 1994 08:49:37 GMT"})
        CHECK_FALSE(http_date_ns(bad).has_value());
}
