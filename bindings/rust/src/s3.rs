// SPDX-License-Identifier: Apache-2.0
//! Storages over an S3 bucket, configured in code (the `s3` feature, which links libckpt_s3:
//! `include/ckpt/ckpt_s3.h`).
//!
//! `s3://bucket/key` paths need no feature: given to [`Vars::save`](crate::Vars::save), [`Manager::open`] or any
//! other call with no storage of their own, libckpt loads libckpt_s3 itself, configured from the environment as
//! the AWS tools are (`AWS_ENDPOINT_URL`, `AWS_REGION`, the credentials and profile files). [`S3Options`] is for
//! choosing that configuration in the program: the endpoint, credentials, part size, timeouts.
//!
//! [`Manager::open`]: crate::Manager::open
use std::ffi::CString;
use std::fmt;
use std::mem::MaybeUninit;
use std::os::raw::c_char;
use std::ptr;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::storage::StorageHandle;
use crate::sys;
use crate::util::c_string;

/// Where the bucket goes in a request's URL (`CKPT_S3_ADDRESSING_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum S3Addressing {
    /// Path-style for an endpoint that is set, virtual-host for AWS's own (the default).
    Auto,
    /// `http(s)://endpoint/bucket/key`.
    Path,
    /// `http(s)://bucket.endpoint/key`.
    Virtual,
}

/// How to reach a bucket (`ckpt_s3_options`), for [`StorageHandle::s3`] and [`StorageHandle::s3_url_with`].
///
/// What is left unset comes from the environment and the AWS files (`AWS_ENDPOINT_URL`, `AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_PROFILE`, `~/.aws/credentials`, …, as `ckpt_s3.h` lists), then from libckpt_s3's
/// defaults. Numbers and durations that are set must be positive: zero, which the C struct reads as "unset", is
/// refused rather than taken for "none" or "no limit".
///
/// ```no_run
/// # fn main() -> ckpt::Result<()> {
/// use std::time::Duration;
/// let options = ckpt::S3Options::new()
///     .bucket("training")
///     .prefix("team-a")
///     .endpoint_url("http://127.0.0.1:9000")
///     .credentials("minioadmin", "minioadmin")
///     .part_size(64 << 20)
///     .stall_timeout(Duration::from_secs(60));
/// let storage = ckpt::StorageHandle::s3(&options)?;
/// // Checkpoints at s3://training/team-a/runs/exp1/ckpt/<index>.npz
/// let manager = ckpt::Manager::open("runs/exp1", &ckpt::ManagerOptions::new().storage(storage))?;
/// # drop(manager);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct S3Options {
    bucket: Option<String>,
    prefix: Option<String>,
    endpoint_url: Option<String>,
    region: Option<String>,
    credentials: Option<(String, String)>,
    session_token: Option<String>,
    profile: Option<String>,
    part_size: Option<u64>,
    parallelism: Option<u32>,
    max_attempts: Option<u32>,
    connect_timeout: Option<Duration>,
    stall_timeout: Option<Duration>,
    retry_window: Option<Duration>,
    addressing: Option<S3Addressing>,
}

impl S3Options {
    /// Nothing set: every value from the environment or the defaults (a bucket is still needed for
    /// [`StorageHandle::s3`]).
    pub fn new() -> S3Options {
        S3Options::default()
    }

    /// The bucket (required by [`StorageHandle::s3`]; an `s3://` URL gives its own).
    #[must_use]
    pub fn bucket(mut self, bucket: &str) -> S3Options {
        self.bucket = Some(bucket.to_string());
        self
    }

    /// Keys are `<prefix>/<path>`; unset or `""` is the bucket's root.
    #[must_use]
    pub fn prefix(mut self, prefix: &str) -> S3Options {
        self.prefix = Some(prefix.to_string());
        self
    }

    /// The store's URL: `"http://127.0.0.1:9000"`, `"https://storage.googleapis.com"`.
    #[must_use]
    pub fn endpoint_url(mut self, url: &str) -> S3Options {
        self.endpoint_url = Some(url.to_string());
        self
    }

    /// The region requests are signed for.
    #[must_use]
    pub fn region(mut self, region: &str) -> S3Options {
        self.region = Some(region.to_string());
        self
    }

    /// The access key: used instead of any from the environment or the AWS files.
    #[must_use]
    pub fn credentials(mut self, access_key_id: &str, secret_access_key: &str) -> S3Options {
        self.credentials = Some((access_key_id.to_string(), secret_access_key.to_string()));
        self
    }

    /// The session token of temporary [`credentials`](S3Options::credentials), which it needs.
    #[must_use]
    pub fn session_token(mut self, token: &str) -> S3Options {
        self.session_token = Some(token.to_string());
        self
    }

    /// The profile of `~/.aws/credentials` and `~/.aws/config` to read; it must exist.
    #[must_use]
    pub fn profile(mut self, name: &str) -> S3Options {
        self.profile = Some(name.to_string());
        self
    }

    /// Bytes per part of a multipart upload and per range of a large read; at least 5 MiB (S3's minimum part).
    /// A file no larger than this goes up in one PUT. By default 16 MiB.
    #[must_use]
    pub fn part_size(mut self, bytes: u64) -> S3Options {
        self.part_size = Some(bytes);
        self
    }

    /// Requests in flight per file; by default 4.
    #[must_use]
    pub fn parallelism(mut self, requests: u32) -> S3Options {
        self.parallelism = Some(requests);
        self
    }

    /// Tries per request, the first included (1: no retries); by default `AWS_MAX_ATTEMPTS`, else as many as
    /// the retry window allows.
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> S3Options {
        self.max_attempts = Some(attempts);
        self
    }

    /// How long connecting may take, rounded up to a whole millisecond; by default 10 s.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> S3Options {
        self.connect_timeout = Some(timeout);
        self
    }

    /// A request that moves no byte for this long is abandoned and retried; rounded up to a whole
    /// millisecond; by default 30 s.
    #[must_use]
    pub fn stall_timeout(mut self, timeout: Duration) -> S3Options {
        self.stall_timeout = Some(timeout);
        self
    }

    /// How long a request keeps being retried after what S3 asks clients to retry (HTTP 5xx, throttling, a
    /// dropped or refused connection, a stall), from its first try: a gateway restarting in the middle of a
    /// save or a restore then costs a wait. Rounded up to a whole millisecond; by default 60 s
    /// (`CKPT_S3_RETRY_SECONDS`).
    #[must_use]
    pub fn retry_window(mut self, window: Duration) -> S3Options {
        self.retry_window = Some(window);
        self
    }

    /// Where the bucket goes in a request's URL.
    #[must_use]
    pub fn addressing(mut self, addressing: S3Addressing) -> S3Options {
        self.addressing = Some(addressing);
        self
    }

    /// The C struct: the library's defaults (`ckpt_s3_options_init`) with the fields set here, pointing into
    /// the C strings it holds.
    fn to_raw(&self) -> Result<RawS3Options> {
        let mut raw = MaybeUninit::<sys::s3::ckpt_s3_options>::zeroed();
        // SAFETY: a valid struct of this version to fill.
        check(unsafe { sys::s3::ckpt_s3_options_init(raw.as_mut_ptr(), sys::s3::CKPT_S3_OPTIONS_VERSION) })?;
        // SAFETY: initialised (zeroed, then filled by the library); every field is an integer or pointer.
        let mut raw = RawS3Options { raw: unsafe { raw.assume_init() }, strings: Vec::new() };
        let credentials = self.credentials.as_ref();
        raw.raw.bucket = raw.text("bucket", self.bucket.as_deref())?;
        raw.raw.prefix = raw.text("prefix", self.prefix.as_deref())?;
        raw.raw.endpoint_url = raw.text("endpoint_url", self.endpoint_url.as_deref())?;
        raw.raw.region = raw.text("region", self.region.as_deref())?;
        raw.raw.access_key_id = raw.text("access_key_id", credentials.map(|c| c.0.as_str()))?;
        raw.raw.secret_access_key = raw.text("secret_access_key", credentials.map(|c| c.1.as_str()))?;
        raw.raw.session_token = raw.text("session_token", self.session_token.as_deref())?;
        raw.raw.profile = raw.text("profile", self.profile.as_deref())?;
        raw.raw.part_size = positive("part_size", self.part_size)?;
        raw.raw.parallelism = positive("parallelism", self.parallelism)?;
        raw.raw.max_attempts = positive("max_attempts", self.max_attempts)?;
        raw.raw.connect_timeout_ms = milliseconds("connect_timeout", self.connect_timeout)?;
        raw.raw.stall_timeout_ms = milliseconds("stall_timeout", self.stall_timeout)?;
        raw.raw.retry_window_ms = milliseconds("retry_window", self.retry_window)?;
        if let Some(addressing) = self.addressing {
            raw.raw.addressing = match addressing {
                S3Addressing::Auto => sys::s3::CKPT_S3_ADDRESSING_AUTO,
                S3Addressing::Path => sys::s3::CKPT_S3_ADDRESSING_PATH,
                S3Addressing::Virtual => sys::s3::CKPT_S3_ADDRESSING_VIRTUAL,
            };
        }
        Ok(raw)
    }
}

/// `ckpt_s3_options` and the C strings its fields point to (a `CString`'s bytes stay put when it moves).
struct RawS3Options {
    raw: sys::s3::ckpt_s3_options,
    strings: Vec<CString>,
}

impl RawS3Options {
    fn text(&mut self, field: &str, value: Option<&str>) -> Result<*const c_char> {
        match value {
            None => Ok(ptr::null()),
            Some(value) => {
                let s = c_string(&format!("S3Options::{field}"), value)?;
                let p = s.as_ptr();
                self.strings.push(s);
                Ok(p)
            }
        }
    }
}

fn positive<T: Default + PartialEq>(field: &str, value: Option<T>) -> Result<T> {
    match value {
        None => Ok(T::default()),
        Some(v) if v == T::default() => Err(Error::invalid(format!(
            "S3Options::{field} is 0: give a positive value, or leave it unset for the default"
        ))),
        Some(v) => Ok(v),
    }
}

fn milliseconds(field: &str, value: Option<Duration>) -> Result<u32> {
    let d = match value {
        None => return Ok(0),
        Some(d) => d,
    };
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    match u32::try_from(ms) {
        Ok(ms) if ms > 0 => Ok(ms),
        _ => Err(Error::invalid(format!(
            "S3Options::{field} is {d:?}: give 1 ms to {} ms, or leave it unset for the default",
            u32::MAX
        ))),
    }
}

impl fmt::Debug for S3Options {
    /// Every field but the secrets: the secret key and session token show as `"<set>"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = |s: Option<&String>| s.map(|_| "<set>");
        f.debug_struct("S3Options")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint_url", &self.endpoint_url)
            .field("region", &self.region)
            .field("access_key_id", &self.credentials.as_ref().map(|c| &c.0))
            .field("secret_access_key", &secret(self.credentials.as_ref().map(|c| &c.1)))
            .field("session_token", &secret(self.session_token.as_ref()))
            .field("profile", &self.profile)
            .field("part_size", &self.part_size)
            .field("parallelism", &self.parallelism)
            .field("max_attempts", &self.max_attempts)
            .field("connect_timeout", &self.connect_timeout)
            .field("stall_timeout", &self.stall_timeout)
            .field("retry_window", &self.retry_window)
            .field("addressing", &self.addressing)
            .finish()
    }
}

impl StorageHandle {
    /// A storage over the options' bucket (`ckpt_storage_s3_new`; the `s3` feature), to put in
    /// [`Options`](crate::Options), [`ManagerOptions`](crate::ManagerOptions) or
    /// [`WriterOptions`](crate::WriterOptions): paths given with it are keys under the options' prefix.
    ///
    /// Nothing is sent until it is used: a missing bucket or wrong credentials fail the first call that uses it
    /// ([`Code::NotFound`](crate::Code::NotFound), [`Code::Io`](crate::Code::Io)), naming the bucket and key.
    /// Fails with [`Code::InvalidArgument`](crate::Code::InvalidArgument) for no bucket, an endpoint that is not
    /// an http(s) URL, a part size under 5 MiB, a zero number or duration; with
    /// [`Code::Format`](crate::Code::Format) for an AWS file that cannot be parsed.
    pub fn s3(options: &S3Options) -> Result<StorageHandle> {
        let raw = options.to_raw()?;
        let mut out = ptr::null_mut();
        // SAFETY: a valid out-pointer and options struct, whose strings live until the call returns.
        check(unsafe { sys::s3::ckpt_storage_s3_new(&mut out, &raw.raw) })?;
        Ok(StorageHandle::from_raw(out))
    }

    /// For `"s3://bucket/key"`: a storage over the bucket, configured from the environment, and the key to give
    /// it as a path (`"runs/exp1"`; `""` for `"s3://bucket"`). It is what libckpt makes of an `s3://` path given
    /// with no storage. Fails with [`Code::InvalidArgument`](crate::Code::InvalidArgument) for a URL that is not
    /// `s3://<bucket>[/<key>]`, and as [`s3`](StorageHandle::s3) does.
    pub fn s3_url(url: &str) -> Result<(StorageHandle, String)> {
        StorageHandle::s3_url_with(url, &S3Options::new())
    }

    /// As [`s3_url`](StorageHandle::s3_url), configured by `options` but for the bucket and prefix, which the
    /// URL gives: setting them in `options` fails with [`Code::InvalidArgument`](crate::Code::InvalidArgument)
    /// rather than letting the URL silently win.
    ///
    /// ```no_run
    /// # fn main() -> ckpt::Result<()> {
    /// let options = ckpt::S3Options::new().endpoint_url("http://127.0.0.1:9000").max_attempts(3);
    /// let (storage, key) = ckpt::StorageHandle::s3_url_with("s3://training/runs/exp1", &options)?;
    /// let manager = ckpt::Manager::open(&key, &ckpt::ManagerOptions::new().storage(storage))?;
    /// # drop(manager);
    /// # Ok(())
    /// # }
    /// ```
    pub fn s3_url_with(url: &str, options: &S3Options) -> Result<(StorageHandle, String)> {
        if options.bucket.is_some() || options.prefix.is_some() {
            return Err(Error::invalid(format!(
                "{url}: StorageHandle::s3_url_with takes the bucket and key from the URL; leave S3Options::bucket \
                 and prefix unset"
            )));
        }
        let raw = options.to_raw()?;
        let c_url = c_string("URL", url)?;
        let mut out = ptr::null_mut();
        let mut key: *const c_char = ptr::null();
        // SAFETY: valid out-pointers, a NUL-terminated URL and an options struct that live until the call returns.
        check(unsafe { sys::s3::ckpt_storage_s3_new_url(&mut out, c_url.as_ptr(), &raw.raw, &mut key) })?;
        let storage = StorageHandle::from_raw(out);
        // The key points into the URL, after a '/' (or at its end): a suffix of `url`, so UTF-8 too.
        let offset = (key as usize).wrapping_sub(c_url.as_ptr() as usize);
        let key = url.get(offset..).ok_or_else(|| {
            Error::new(crate::Code::Internal, format!("{url}: the library gave a key outside the URL"))
        })?;
        Ok((storage, key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn text(p: *const c_char) -> Option<String> {
        // SAFETY: NULL or a string of the RawS3Options alive in the caller.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string())
    }

    #[test]
    fn every_option_lands_in_its_field_of_the_c_struct() {
        let options = S3Options::new()
            .bucket("bkt")
            .prefix("runs")
            .endpoint_url("http://127.0.0.1:1")
            .region("eu-west-3")
            .credentials("AK", "SK")
            .session_token("TOK")
            .profile("p")
            .part_size(8 << 20)
            .parallelism(3)
            .max_attempts(2)
            .connect_timeout(Duration::from_secs(3))
            .stall_timeout(Duration::from_micros(1_500_001))
            .retry_window(Duration::from_secs(12))
            .addressing(S3Addressing::Virtual);
        let raw = options.to_raw().unwrap();
        let c = &raw.raw;
        assert_eq!(c.version, sys::s3::CKPT_S3_OPTIONS_VERSION);
        assert_eq!(text(c.bucket).as_deref(), Some("bkt"));
        assert_eq!(text(c.prefix).as_deref(), Some("runs"));
        assert_eq!(text(c.endpoint_url).as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(text(c.region).as_deref(), Some("eu-west-3"));
        assert_eq!(text(c.access_key_id).as_deref(), Some("AK"));
        assert_eq!(text(c.secret_access_key).as_deref(), Some("SK"));
        assert_eq!(text(c.session_token).as_deref(), Some("TOK"));
        assert_eq!(text(c.profile).as_deref(), Some("p"));
        assert_eq!(c.part_size, 8 << 20);
        assert_eq!(c.parallelism, 3);
        assert_eq!(c.max_attempts, 2);
        assert_eq!(c.connect_timeout_ms, 3000);
        assert_eq!(c.stall_timeout_ms, 1501, "rounded up to a whole millisecond");
        assert_eq!(c.retry_window_ms, 12000);
        assert_eq!(c.addressing, sys::s3::CKPT_S3_ADDRESSING_VIRTUAL);

        // Unset: NULL and 0, for libckpt_s3 to resolve from the environment.
        let raw = S3Options::new().to_raw().unwrap();
        let c = &raw.raw;
        for p in [c.bucket, c.prefix, c.endpoint_url, c.region, c.access_key_id, c.secret_access_key, c.session_token] {
            assert!(p.is_null());
        }
        assert!(c.profile.is_null());
        assert_eq!((c.part_size, c.parallelism, c.max_attempts), (0, 0, 0));
        assert_eq!((c.connect_timeout_ms, c.stall_timeout_ms, c.retry_window_ms), (0, 0, 0));
        assert_eq!(c.addressing, sys::s3::CKPT_S3_ADDRESSING_AUTO);
    }
}
