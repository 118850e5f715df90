// SPDX-License-Identifier: Apache-2.0
#include "config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

namespace ckpt::s3 {
namespace {

[[noreturn]] void invalid(std::string message) { throw ConfigError{CKPT_EINVAL, std::move(message)}; }

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string trim(const std::string& s) {
    size_t begin = 0, end = s.size();
    while (begin < end && is_blank(s[begin])) ++begin;
    while (end > begin && is_blank(s[end - 1])) --end;
    return s.substr(begin, end - begin);
}

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

std::string str(const char* s) { return s ? s : ""; }

// Appends the '/'-separated segments of `path` to `key`, leaving out empty and "." segments.
void append_segments(std::string& key, const std::string& path) {
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        const std::string segment = path.substr(start, end - start);
        if (!segment.empty() && segment != ".") {
            if (!key.empty()) key += '/';
            key += segment;
        }
        start = end + 1;
    }
}

// A value and how to name where it came from in an error: "AWS_REGION", "ckpt_s3_options.region",
// "region of profile 'dev' in /root/.aws/config".
struct Setting {
    std::string value;
    std::string name;
};

// ---- The AWS shared files ----------------------------------------------------------------------------------------

using Section = std::map<std::string, std::string>;

// One AWS file, parsed: its sections by their header with runs of whitespace made one space ("default",
// "profile dev", "services local"), each from lowercase key to value. The settings of a sub-section ("s3 =" and
// the indented lines under it) are "s3.endpoint_url" and so on.
struct AwsFile {
    std::string path;  // "" when there is no path for it (no HOME)
    std::map<std::string, Section> sections;

    const Section* section(const std::string& name) const {
        auto it = sections.find(name);
        return it == sections.end() ? nullptr : &it->second;
    }
};

std::string collapse_blanks(const std::string& s) {
    std::string out;
    for (char c : trim(s)) {
        if (is_blank(c)) {
            if (out.back() != ' ') out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

bool is_secret(const std::string& key) { return key == "aws_secret_access_key" || key == "aws_session_token"; }

// A line as an error message shows it: shortened, and without the value of a secret (error messages get logged).
std::string shown(const std::string& line) {
    for (const char* secret : {"aws_secret_access_key", "aws_session_token"})
        if (lower(line).rfind(secret, 0) == 0) return std::string(secret) + " ... (value not shown)";
    return line.size() <= 80 ? line : line.substr(0, 77) + "...";
}

// "key = value" into its lowercase key and its value, less a trailing comment (a '#' or ';' after whitespace, as
// the AWS SDKs read them: secrets and URLs have no whitespace, so nothing of a value is lost). False when it is not
// a setting.
bool split_setting(const std::string& text, std::string& key, std::string& value) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) return false;
    key = lower(trim(text.substr(0, eq)));
    std::string rest = text.substr(eq + 1);
    for (size_t i = 1; i < rest.size(); ++i) {
        if ((rest[i] == '#' || rest[i] == ';') && is_blank(rest[i - 1])) {
            rest.resize(i);
            break;
        }
    }
    value = trim(rest);
    return !key.empty();
}

// The AWS format is INI with rules of its own (sub-sections of indented lines, comments only after whitespace,
// "[profile name]"), which generic INI readers such as inih do not know; it is small enough to read here.
AwsFile parse_aws_file(const std::string& path, std::string text) {
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a byte-order mark, as Windows editors write
    AwsFile file{path, {}};
    Section* section = nullptr;
    std::string parent;  // the last setting of the section: indented lines continue it, or are its sub-settings
    std::istringstream in(text);
    std::string line;
    for (unsigned number = 1; std::getline(in, line); ++number) {
        auto malformed = [&](const std::string& what) {
            throw ConfigError{CKPT_EFORMAT, path + ":" + std::to_string(number) + ": " + what};
        };
        const std::string t = trim(line);
        if (t.empty() || t[0] == '#' || t[0] == ';') continue;
        if (is_blank(line[0]) && !parent.empty()) {
            // "s3 =" with nothing after it opens a sub-section; under any other setting an indented line continues
            // the value, as in Python's configparser, which the AWS command-line tools use.
            std::string& value = (*section)[parent];
            if (!value.empty()) {
                value += '\n' + t;
                continue;
            }
            std::string key, sub_value;
            if (!split_setting(t, key, sub_value))
                malformed("expected 'key = value' under '" + parent + " =', got '" +
                          (is_secret(parent) ? std::string("(value not shown)") : shown(t)) + "'");
            (*section)[parent + "." + key] = sub_value;
            continue;
        }
        if (t[0] == '[') {
            const size_t close = t.find(']');
            if (close == std::string::npos) malformed("expected ']' to end the section header '" + shown(t) + "'");
            const std::string after = trim(t.substr(close + 1));
            if (!after.empty() && after[0] != '#' && after[0] != ';')
                malformed("unexpected '" + shown(after) + "' after the section header");
            const std::string name = collapse_blanks(t.substr(1, close - 1));
            if (name.empty()) malformed("the section header '" + t + "' has no name");
            section = &file.sections[name];  // a second [name] adds to the first, later settings winning
            parent.clear();
            continue;
        }
        if (!section) malformed("'" + shown(t) + "' comes before any [section]");
        std::string key, value;
        if (!split_setting(t, key, value)) malformed("expected 'key = value', got '" + shown(t) + "'");
        (*section)[key] = value;
        parent = key;
    }
    return file;
}

// The file at `path`, parsed; without sections when there is no path or no such file (both files are optional).
AwsFile load_aws_file(const std::string& path) {
    if (path.empty()) return {};
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return {path, {}};
        invalid("cannot read the AWS file " + path + ": " + std::generic_category().message(errno));
    }
    // A character device is read as it is, so that the usual AWS_CONFIG_FILE=/dev/null means an empty file.
    if (S_ISDIR(st.st_mode)) invalid("the AWS file " + path + " is a directory");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) invalid("cannot read the AWS file " + path + ": " + std::generic_category().message(errno));
    std::string text;
    char buf[8192];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    const bool failed = std::ferror(f);
    const int err = errno;
    std::fclose(f);
    if (failed) invalid("cannot read the AWS file " + path + ": " + std::generic_category().message(err));
    return parse_aws_file(path, std::move(text));
}

// One profile as both files give it: the credentials file has it as [name], the config file as [profile name]
// (and [default] or [profile default] for "default"). A setting is the credentials file's, else the config file's.
class Profile {
public:
    Profile(std::string name, const AwsFile& credentials, const AwsFile& config)
        : name_(std::move(name)), credentials_(credentials), config_(config) {
        if (const Section* s = credentials.section(name_)) in_credentials_ = *s;
        const bool is_default = name_ == "default";
        if (const Section* s = config.section(is_default ? "default" : "profile " + name_)) in_config_ = *s;
        if (is_default) {
            if (const Section* s = config.section("profile default")) {
                if (!in_config_) in_config_.emplace();
                for (const auto& [k, v] : *s) (*in_config_)[k] = v;
            }
        }
    }

    const std::string& name() const { return name_; }
    bool exists() const { return in_credentials_ || in_config_; }

    std::optional<Setting> get(const std::string& key) const {
        if (auto s = get_in(in_credentials_, credentials_, key)) return s;
        return get_in(in_config_, config_, key);
    }

    // The s3 endpoint of the [services <name>] section that the profile's `services` setting names, the form the
    // AWS documentation gives for a service's own endpoint.
    std::optional<Setting> services_endpoint() const {
        const auto services = get("services");
        if (!services) return std::nullopt;
        const Section* s = config_.section("services " + services->value);
        if (!s) return std::nullopt;
        auto it = s->find("s3.endpoint_url");
        if (it == s->end() || it->second.empty()) return std::nullopt;
        return Setting{it->second, "s3.endpoint_url of [services " + services->value + "] in " + config_.path};
    }

    struct Credentials {
        std::string key_id, secret, token;
    };
    // The profile's key, secret and token, all three from the first file that has a key or a secret: a token is
    // never paired with another file's keys.
    std::optional<Credentials> credentials() const {
        for (auto [section, file] : {std::pair{&in_credentials_, &credentials_}, std::pair{&in_config_, &config_}}) {
            const auto key_id = get_in(*section, *file, "aws_access_key_id");
            const auto secret = get_in(*section, *file, "aws_secret_access_key");
            if (!key_id && !secret) continue;
            const std::string where = "profile '" + name_ + "' in " + file->path;
            if (!secret) invalid(where + " has aws_access_key_id but no aws_secret_access_key");
            if (!key_id) invalid(where + " has aws_secret_access_key but no aws_access_key_id");
            const auto token = get_in(*section, *file, "aws_session_token");
            return Credentials{key_id->value, secret->value, token ? token->value : ""};
        }
        return std::nullopt;
    }

private:
    std::optional<Setting> get_in(const std::optional<Section>& section, const AwsFile& file,
                                  const std::string& key) const {
        if (!section) return std::nullopt;
        auto it = section->find(key);
        if (it == section->end() || it->second.empty()) return std::nullopt;
        return Setting{it->second, key + " of profile '" + name_ + "' in " + file.path};
    }

    std::string name_;
    const AwsFile& credentials_;
    const AwsFile& config_;
    std::optional<Section> in_credentials_, in_config_;
};

// ---- Checks ------------------------------------------------------------------------------------------------------

// S3's rules for bucket names (those it gives a reason for; it refuses a few more, such as IP addresses, itself).
void check_bucket(const std::string& bucket) {
    bool ok = bucket.size() >= 3 && bucket.size() <= 63 && is_alnum_lower(bucket.front()) &&
              is_alnum_lower(bucket.back()) && bucket.find("..") == std::string::npos;
    for (char c : bucket) ok = ok && (is_alnum_lower(c) || c == '.' || c == '-');
    if (!ok)
        invalid("bucket name '" + bucket +
                "' is not one S3 accepts: 3 to 63 characters of a-z, 0-9, '.' and '-', beginning and ending with a "
                "letter or digit, no '..'");
}

// The region becomes part of a host name and of every signature's scope.
void check_region(const Setting& region) {
    bool ok = !region.value.empty();
    for (char c : region.value)
        ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
    if (!ok) invalid(region.name + " '" + region.value + "' is not a region name (letters, digits, '-' and '_')");
}

// scheme://host[:port][/path] with an http or https scheme, returned with the scheme in lowercase and without
// trailing '/'.
std::string checked_endpoint(const Setting& endpoint) {
    const std::string& url = endpoint.value;
    auto bad = [&](const std::string& why) { invalid(endpoint.name + " '" + url + "' " + why); };
    const size_t sep = url.find("://");
    const std::string scheme = sep == std::string::npos ? "" : lower(url.substr(0, sep));
    if (scheme != "http" && scheme != "https") bad("is not an http:// or https:// URL");
    for (unsigned char c : url)
        if (c <= ' ' || c == 0x7f || c == '?' || c == '#') bad("has a space, control character, query or fragment");
    std::string rest = url.substr(sep + 3);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    if (rest.empty() || rest[0] == '/') bad("has no host");
    return scheme + "://" + rest;
}

unsigned positive_integer(const Setting& s) {
    uint64_t n = 0;
    bool ok = !s.value.empty() && s.value.size() <= 10;
    for (char c : s.value) {
        ok = ok && c >= '0' && c <= '9';
        if (ok) n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (!ok || n == 0 || n > UINT32_MAX) invalid(s.name + " '" + s.value + "' is not a positive integer");
    return static_cast<unsigned>(n);
}

// The first of `settings` that is set.
std::optional<Setting> first_of(std::initializer_list<std::optional<Setting>> settings) {
    for (const auto& s : settings)
        if (s) return s;
    return std::nullopt;
}

}  // namespace

// ---- Config ------------------------------------------------------------------------------------------------------

std::string uri_encode(const std::string& s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                                c == '-' || c == '.' || c == '_' || c == '~';
        if (unreserved || (keep_slash && c == '/')) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string Config::bucket_url() const {
    if (path_style) return endpoint + "/" + bucket;
    const size_t host = endpoint.find("://") + 3;
    return endpoint.substr(0, host) + bucket + "." + endpoint.substr(host);
}

std::string Config::object_url(const std::string& key) const { return bucket_url() + "/" + uri_encode(key, true); }

std::string Config::key_of(const std::string& path) const {
    std::string key = prefix;
    append_segments(key, path);
    return key;
}

bool known_options_version(uint32_t version) { return version >= 1 && version <= CKPT_S3_OPTIONS_VERSION; }

void options_init(ckpt_s3_options* opts) {
    const ckpt_s3_options defaults = CKPT_S3_OPTIONS_INIT;
    *opts = defaults;
}

Config resolve_config(const ckpt_s3_options& opts, const std::function<const char*(const char*)>& getenv) {
    if (!known_options_version(opts.version))
        invalid("ckpt_s3_options.version " + std::to_string(opts.version) + " is not one this library knows (1 to " +
                std::to_string(CKPT_S3_OPTIONS_VERSION) + ")");
    auto env = [&](const char* name) -> std::optional<Setting> {
        const char* v = getenv(name);
        if (!v || !*v) return std::nullopt;
        return Setting{v, name};
    };
    auto option = [](const char* field, const char* v) -> std::optional<Setting> {
        if (!v || !*v) return std::nullopt;
        return Setting{v, std::string("ckpt_s3_options.") + field};
    };

    Config c;
    c.bucket = str(opts.bucket);
    if (c.bucket.empty()) invalid("ckpt_s3_options.bucket is not set: the storage needs a bucket");
    check_bucket(c.bucket);
    append_segments(c.prefix, str(opts.prefix));

    c.part_size = opts.part_size ? opts.part_size : kDefaultPartSize;
    if (c.part_size < kMinPartSize)
        invalid("part_size " + std::to_string(c.part_size) + " is below S3's 5 MiB minimum part");
    if (c.part_size > kMaxPartSize)
        invalid("part_size " + std::to_string(c.part_size) + " is above S3's 5 GiB maximum part");
    if (opts.parallelism) c.parallelism = opts.parallelism;
    if (opts.connect_timeout_ms) c.connect_timeout_ms = opts.connect_timeout_ms;
    if (opts.stall_timeout_ms) c.stall_timeout_ms = opts.stall_timeout_ms;
    if (opts.addressing > CKPT_S3_ADDRESSING_VIRTUAL)
        invalid("ckpt_s3_options.addressing " + std::to_string(opts.addressing) +
                " is not CKPT_S3_ADDRESSING_AUTO, _PATH or _VIRTUAL");

    // Explicit credentials are all or nothing: half of them would silently mix with the environment's.
    const std::string key_id = str(opts.access_key_id), secret = str(opts.secret_access_key),
                      token = str(opts.session_token);
    if (!key_id.empty() && secret.empty())
        invalid("ckpt_s3_options.access_key_id is set but secret_access_key is not");
    if (key_id.empty() && !secret.empty())
        invalid("ckpt_s3_options.secret_access_key is set but access_key_id is not");
    if (key_id.empty() && !token.empty())
        invalid("ckpt_s3_options.session_token is set but access_key_id and secret_access_key are not");

    // The files, and the profile in them.
    const std::string home = str(getenv("HOME"));
    auto file_path = [&](const char* variable, const char* under_home) {
        std::string path = str(getenv(variable));
        if (path.empty()) return home.empty() ? std::string() : home + under_home;
        if (path.rfind("~/", 0) == 0 && !home.empty()) path = home + path.substr(1);
        return path;
    };
    const AwsFile credentials_file = load_aws_file(file_path("AWS_SHARED_CREDENTIALS_FILE", "/.aws/credentials"));
    const AwsFile config_file = load_aws_file(file_path("AWS_CONFIG_FILE", "/.aws/config"));
    const Setting profile_name =
        *first_of({option("profile", opts.profile), env("AWS_PROFILE"), Setting{"default", "profile"}});
    const Profile profile(profile_name.value, credentials_file, config_file);
    // A profile asked for by name must be there (a typo would otherwise mean other credentials, or none); the
    // default profile need not be.
    if (!profile.exists() && profile.name() != "default") {
        auto named = [](const AwsFile& f, const char* what) {
            return f.path.empty() ? std::string("no ") + what + " file (HOME is not set)" : f.path;
        };
        invalid("profile '" + profile.name() + "' (from " + profile_name.name + ") is in neither " +
                named(credentials_file, "credentials") + " nor " + named(config_file, "config"));
    }
    c.profile = profile.name();

    const Setting region = *first_of({option("region", opts.region), env("AWS_REGION"), env("AWS_DEFAULT_REGION"),
                                      profile.get("region"), Setting{"us-east-1", "region"}});
    check_region(region);
    c.region = region.value;

    // The endpoint: the profile's own s3 sub-section before the [services] section it names, both before its
    // endpoint_url for every service. AWS_IGNORE_CONFIGURED_ENDPOINT_URLS leaves all but the option aside.
    std::optional<Setting> endpoint = option("endpoint_url", opts.endpoint_url);
    if (!endpoint) {
        const auto ignore = first_of({env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"),
                                      profile.get("ignore_configured_endpoint_urls")});
        if (!ignore || lower(ignore->value) != "true")
            endpoint = first_of({env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"), profile.get("s3.endpoint_url"),
                                 profile.services_endpoint(), profile.get("endpoint_url")});
    }
    if (endpoint) {
        c.endpoint = checked_endpoint(*endpoint);
    } else {
        const bool china = c.region.rfind("cn-", 0) == 0;
        c.endpoint = "https://s3." + c.region + (china ? ".amazonaws.com.cn" : ".amazonaws.com");
    }
    // AWS's own endpoints serve every bucket under its own host name; other stores (MinIO, Ceph, a local server)
    // mostly have one host name, hence path-style.
    c.path_style = opts.addressing == CKPT_S3_ADDRESSING_PATH ||
                   (opts.addressing == CKPT_S3_ADDRESSING_AUTO && endpoint.has_value());

    if (!key_id.empty()) {
        c.access_key_id = key_id;
        c.secret_access_key = secret;
        c.session_token = token;
    } else if (const auto env_key = env("AWS_ACCESS_KEY_ID"), env_secret = env("AWS_SECRET_ACCESS_KEY");
               env_key && env_secret) {
        c.access_key_id = env_key->value;
        c.secret_access_key = env_secret->value;
        if (const auto env_token = env("AWS_SESSION_TOKEN")) c.session_token = env_token->value;
    } else if (const auto creds = profile.credentials()) {
        c.access_key_id = creds->key_id;
        c.secret_access_key = creds->secret;
        c.session_token = creds->token;
    }

    if (opts.max_attempts) {
        c.max_attempts = opts.max_attempts;
    } else if (const auto attempts = first_of({env("AWS_MAX_ATTEMPTS"), profile.get("max_attempts")})) {
        c.max_attempts = positive_integer(*attempts);
    }
    if (opts.retry_window_ms) {
        c.retry_window_ms = opts.retry_window_ms;
    } else if (const auto seconds = env("CKPT_S3_RETRY_SECONDS")) {
        c.retry_window_ms = static_cast<long>(std::min<uint64_t>(positive_integer(*seconds), 86400) * 1000);
    }
    return c;
}

}  // namespace ckpt::s3
