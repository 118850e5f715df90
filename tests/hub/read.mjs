#!/usr/bin/env node
// A second reader of safetensors files for ckpt's tests: @huggingface/hub's parseSafetensorsMetadata (pinned in
// package.json; `scripts/deps test` runs `npm ci` here), over local files instead of the Hugging Face Hub.
//
//   node tests/hub/read.mjs PATH [PATH...]
//
// PATH is a .safetensors file or a *.safetensors.index.json (a sharded layout, its shards beside it). Prints one
// line of JSON per PATH, in order:
//   {"path": PATH, "sharded": false, "metadata": <__metadata__ or null>,
//    "tensors": {name: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}}}
//   {"path": PATH, "sharded": true, "index": <the index's "metadata" or null>, "weight_map": {...},
//    "headers": {shard file: {"metadata": ..., "tensors": {...}}}}
//   {"path": PATH, "error": "..."}                       (and the exit status is then 1)
//
// The library reads a repository through `fetch`; it is given one that serves PATH's folder from disk. With `path`
// set and no parameter count asked for, it requests (lib/file-download-info.ts, utils/WebBlob.ts):
//   GET  {hubUrl}/{repo}/resolve/{revision}/{path}  Range: bytes=0-0   size (Content-Range) and ETag; 404 with
//                                                                      X-Error-Code: EntryNotFound = no such file
//   GET  the same URL  Range: bytes=a-b                                 the 8-byte length, then the JSON header
//   GET  the same URL, no Range                                         an index file, whole (streamed)
// and for each shard of an index the same, with path = the index's folder + the shard's name, each segment
// percent-encoded. HEAD ({hubUrl}/{repo}/raw/{revision}/{path}, lib/file-exists.ts) comes only without `path`, but
// is answered as well. Nothing here touches the network: any other URL is answered 404, and the global fetch throws.

import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { parseSafetensorsMetadata } from '@huggingface/hub';

const HUB_URL = 'http://ckpt-local.invalid';
const REPO = 'ckpt/local';
const REVISION = 'main';
const PREFIX = new RegExp(`^/${REPO}/(resolve|raw)/${REVISION}/(.+)$`);

// No request may leave the machine, whatever the library does besides the custom fetch.
globalThis.fetch = async (url) => {
    throw new Error(`read.mjs: network access refused (${url})`);
};

// The file under `root` that a URL of the library names, or null for a URL that is not one of ours.
function localFile(root, url) {
    const u = new URL(url);
    if (u.origin !== HUB_URL) {
        return null;
    }
    const m = PREFIX.exec(u.pathname);
    if (!m) {
        return null;
    }
    const segments = m[2].split('/').map(decodeURIComponent);
    if (segments.some((s) => s === '' || s === '.' || s === '..' || s.includes('\0'))) {
        return null;
    }
    return path.join(root, ...segments);
}

// An error answer, in JSON as the Hub's are: the library puts its "error" into the message it throws.
function failure(status, message, headers = {}) {
    return new Response(JSON.stringify({ error: message }), {
        status,
        headers: { ...headers, 'Content-Type': 'application/json' },
    });
}

function notFound(url) {
    return failure(404, `no such file: ${url}`, { 'X-Error-Code': 'EntryNotFound' });
}

function unsatisfiable(file, range, size) {
    return failure(416, `range ${range} not satisfiable in ${file} (${size} bytes)`, {
        'Content-Range': `bytes */${size}`,
    });
}

// A fetch that serves the folder `root`: GET (whole, or one `Range: bytes=a-b`, answered 206 with Content-Range),
// HEAD, and 404 for what is not there.
function localFetch(root) {
    return async (input, init = {}) => {
        const url = input instanceof Request ? input.url : String(input);
        const method = (init.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
        const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
        const file = localFile(root, url);
        if (file === null) {
            return notFound(url);
        }
        let st;
        try {
            st = await stat(file);
        } catch {
            return notFound(url);
        }
        if (!st.isFile()) {
            return notFound(url);
        }
        const size = st.size;
        const common = {
            'Content-Type': 'application/octet-stream',
            'Accept-Ranges': 'bytes',
            ETag: `"${size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`,
        };
        if (method === 'HEAD') {
            return new Response(null, { status: 200, headers: { ...common, 'Content-Length': String(size) } });
        }
        if (method !== 'GET') {
            return failure(405, `method ${method} not served`);
        }
        const range = headers.get('range');
        let start = 0;
        let end = size - 1; // inclusive
        let status = 200;
        if (range !== null) {
            const m = /^bytes=(\d+)-(\d*)$/.exec(range.trim());
            if (!m) {
                return unsatisfiable(file, range, size);
            }
            start = Number(m[1]);
            end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
            if (start > end || start >= size) {
                if (size === 0 && start === 0) {
                    // An empty file: nothing to send, but the size to tell.
                    return new Response(new Uint8Array(0), {
                        status: 206,
                        headers: { ...common, 'Content-Range': `bytes */0`, 'Content-Length': '0' },
                    });
                }
                return unsatisfiable(file, range, size);
            }
            status = 206;
        }
        const length = size === 0 ? 0 : end - start + 1;
        let body;
        if (length === 0) {
            body = new Uint8Array(0);
        } else {
            const fh = await open(file, 'r');
            // The file handle's stream closes the handle once read (or cancelled).
            body = Readable.toWeb(fh.createReadStream({ start, end, autoClose: true }));
        }
        const out = { ...common, 'Content-Length': String(length) };
        if (status === 206) {
            out['Content-Range'] = `bytes ${start}-${end}/${size}`;
        }
        return new Response(body, { status, headers: out });
    };
}

function tensorsOf(header) {
    const tensors = {};
    for (const [name, info] of Object.entries(header)) {
        if (name === '__metadata__') {
            continue;
        }
        tensors[name] = { dtype: info.dtype, shape: info.shape, data_offsets: info.data_offsets };
    }
    return tensors;
}

async function read(arg) {
    const abs = path.resolve(arg);
    const root = path.dirname(abs);
    const result = await parseSafetensorsMetadata({
        repo: REPO,
        revision: REVISION,
        hubUrl: HUB_URL,
        // Percent-encoded like the library's shard names, so that a name with '#', '?', '%' or a space survives
        // the URL; the library tells a file from an index by the name's ending, which encoding leaves alone.
        path: encodeURIComponent(path.basename(abs)),
        computeParametersCount: false,
        fetch: localFetch(root),
    });
    if (!result.sharded) {
        return {
            path: arg,
            sharded: false,
            metadata: result.header.__metadata__ ?? null,
            tensors: tensorsOf(result.header),
        };
    }
    const headers = {};
    for (const [shard, header] of Object.entries(result.headers)) {
        headers[shard] = { metadata: header.__metadata__ ?? null, tensors: tensorsOf(header) };
    }
    return {
        path: arg,
        sharded: true,
        index: result.index.metadata ?? null,
        weight_map: result.index.weight_map ?? null,
        headers,
    };
}

// JSON with BigInt values written as plain numbers (JSON.stringify refuses them): each becomes a marker string
// that no real string can be (it holds a random nonce), replaced by its digits afterwards.
const NONCE = Math.random().toString(36).slice(2);
function stringify(value) {
    const text = JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `@@bigint-${NONCE}:${v}@@` : v));
    return text.replace(new RegExp(`"@@bigint-${NONCE}:(-?\\d+)@@"`, 'g'), '$1');
}

const args = process.argv.slice(2);
if (args.length === 0) {
    process.stderr.write('usage: node read.mjs PATH [PATH...]   (PATH: a .safetensors file or an index .json)\n');
    process.exit(2);
}
let failed = false;
for (const arg of args) {
    let line;
    try {
        line = stringify(await read(arg));
    } catch (err) {
        failed = true;
        line = stringify({ path: arg, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    }
    process.stdout.write(line + '\n');
}
process.exitCode = failed ? 1 : 0;
