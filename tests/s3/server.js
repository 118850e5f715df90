#!/usr/bin/env node
// The S3 server of ckpt's S3 tests: s3rver on 127.0.0.1, its objects in a directory that outlives it.
//
//   node server.js --directory DIR [--port N] [--bucket NAME]... [--exit-with-stdin]
//
// Prints "PORT <n>" once it listens (port 0, the default, lets the system choose). Exits on SIGTERM, and with
// --exit-with-stdin also when its standard input ends: a runner that holds the other end of a pipe there cannot
// leave the server behind, even when it is killed itself. Restarted on the same directory (and port), it serves the
// objects and multipart uploads it had, so a test can kill it in the middle of a save and bring it back.
//
// s3rver lacks a few things that ckpt's S3 storage relies on and real S3 has; the middleware below adds them, before
// s3rver's router so that s3rver never sees those requests:
//  - AbortMultipartUpload (s3rver answers 405): a save that fails aborts its upload, and the tests check that no
//    upload is left behind;
//  - ListMultipartUploads (s3rver answers 501): how the tests see which uploads are left;
//  - NoSuchUpload for a part or a completion of an upload that does not exist (s3rver recreates the upload's folder
//    for a part, and fails a completion with a 500), so that an aborted upload stays aborted;
//  - CompleteMultipartUpload's checks (s3rver has none, and waits forever for a part that is missing): every part
//    named must have been uploaded with the ETag given (InvalidPart), in ascending order (InvalidPartOrder), and all
//    but the last must be at least 5 MiB (EntityTooSmall);
//  - If-Match on GET and HEAD (s3rver ignores it): reads are pinned to the ETag of the object they opened;
//  - objects replaced atomically: s3rver writes an object's file in place, so a reader, or a server killed during a
//    PUT or a completion, would see part of the new object; here it is written beside and renamed over the old one.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { pipeline, Readable, Transform } = require('stream');
const { promisify } = require('util');

const S3rver = require('s3rver');
const S3Error = require('s3rver/lib/models/error');
const S3Object = require('s3rver/lib/models/object');

function parseArgs(argv) {
  const args = { port: 0, buckets: [], directory: null, exitWithStdin: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--exit-with-stdin') {
      args.exitWithStdin = true;
      continue;
    }
    const value = argv[i + 1];
    if (argv[i].startsWith('--') && value === undefined) throw new Error(`server.js: ${argv[i]} needs a value`);
    switch (argv[i]) {
      case '--directory': args.directory = value; i++; break;
      case '--port': args.port = Number(value); i++; break;
      case '--bucket': args.buckets.push(value); i++; break;
      default:
        throw new Error(`server.js: unknown argument '${argv[i]}'`);
    }
  }
  if (!args.directory) throw new Error('server.js: --directory is required');
  if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) {
    throw new Error(`server.js: bad --port '${args.port}'`);
  }
  return args;
}

// Writes a small file so that it is either the old or the new one, never half of either.
async function writeFileAtomic(file, data) {
  const temporary = `${file}.${crypto.randomBytes(6).toString('hex')}.partial`;
  await fs.promises.writeFile(temporary, data);
  await fs.promises.rename(temporary, file);
}

// Replaces FilesystemStore.putObject (also used by the completion of a multipart upload) with one that writes the
// object beside its final name and renames it there. The ".partial" files do not end in "._S3rver_object", so
// listings never see them. The ETag file is removed before the rename and written after it: in between, s3rver
// computes the ETag from the object itself, so the ETag always belongs to the content that is there.
function makeAtomicPutObject(store) {
  return async function putObject(object) {
    const objectPath = store.getResourcePath(object.bucket, object.key, 'object');
    await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
    const temporary = `${objectPath}.${crypto.randomBytes(6).toString('hex')}.partial`;
    const md5 = crypto.createHash('md5');
    let size = 0;
    const content = Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content;
    // The file is created before the body is read: a stream that opened it by itself could still be opening it
    // on one of libuv's threads when an aborted request's cleanup removes it on another, leaving it for good.
    const handle = await fs.promises.open(temporary, 'w');
    try {
      await promisify(pipeline)(
        content,
        new Transform({
          transform(chunk, encoding, callback) {
            md5.update(chunk);
            size += chunk.length;
            callback(null, chunk);
          },
        }),
        handle.createWriteStream(),
      );
    } catch (err) {
      await handle.close().catch(() => {}); // waits for a write in flight; the stream may have closed it already
      await fs.promises.rm(temporary, { force: true });
      throw err;
    }
    const digest = md5.digest('hex');
    const metadata = {};
    for (const [name, value] of Object.entries(object.metadata)) {
      if (S3Object.ALLOWED_METADATA.includes(name) || name.startsWith('x-amz-meta-')) metadata[name] = value;
    }
    await writeFileAtomic(store.getResourcePath(object.bucket, object.key, 'metadata.json'),
                          JSON.stringify(metadata, null, 2));
    await fs.promises.rm(`${objectPath}.md5`, { force: true });
    await fs.promises.rename(temporary, objectPath);
    await writeFileAtomic(`${objectPath}.md5`, digest);
    return { size, md5: digest };
  };
}

const MIN_PART_SIZE = 5 * 1024 * 1024;

// Wraps FilesystemStore.putObjectMultipart (which the completion calls with the parts of its request, their ETags
// unquoted) with the checks S3 makes before it assembles the object.
function makeCheckedPutObjectMultipart(store) {
  const assemble = store.putObjectMultipart.bind(store);
  return async function putObjectMultipart(bucket, uploadId, parts) {
    if (parts.some((part, i) => i > 0 && part.number <= parts[i - 1].number)) {
      throw new S3Error('InvalidPartOrder', 'The list of parts was not in ascending order. The parts list must be ' +
                        'specified in order by part number.');
    }
    for (let i = 0; i < parts.length; i++) {
      const { number, etag } = parts[i];
      const partPath = path.join(uploadsDir(store, bucket), uploadId, String(number));
      let md5, size;
      try {
        [md5, { size }] = await Promise.all([fs.promises.readFile(`${partPath}.md5`, 'utf8'),
                                             fs.promises.stat(partPath)]);
      } catch (err) {
        if (err.code !== 'ENOENT') throw err;
      }
      if (md5 === undefined || md5 !== etag) {
        throw new S3Error('InvalidPart', 'One or more of the specified parts could not be found. The part may not ' +
                          "have been uploaded, or the specified entity tag may not match the part's entity tag.",
                          { UploadId: uploadId, PartNumber: number, ETag: etag });
      }
      if (i < parts.length - 1 && size < MIN_PART_SIZE) {
        throw new S3Error('EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed object size.',
                          { PartNumber: number, ProposedSize: size, MinSizeAllowed: MIN_PART_SIZE });
      }
    }
    return assemble(bucket, uploadId, parts);
  };
}

function noSuchUpload(uploadId) {
  return new S3Error('NoSuchUpload',
    'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or ' +
    'completed.', { UploadId: uploadId });
}

// The multipart uploads of a bucket, as s3rver's FilesystemStore keeps them (initiateUpload): one folder per upload
// under "<bucket>/._S3rver_uploads", holding a file "key" with the object's key and one file per part.
function uploadsDir(store, bucket) {
  return store.getResourcePath(bucket, undefined, 'uploads');
}

async function readUploadKey(store, bucket, uploadId) {
  if (!/^[0-9a-f]+$/.test(uploadId)) return null; // s3rver's ids are hex; anything else names no folder of ours
  try {
    return await fs.promises.readFile(path.join(uploadsDir(store, bucket), uploadId, 'key'), 'utf8');
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
    throw err;
  }
}

async function listUploads(store, bucket, prefix) {
  let ids;
  try {
    ids = await fs.promises.readdir(uploadsDir(store, bucket));
  } catch (err) {
    if (err.code === 'ENOENT') return [];
    throw err;
  }
  const uploads = [];
  for (const id of ids) {
    const key = await readUploadKey(store, bucket, id);
    if (key === null || !key.startsWith(prefix)) continue; // a folder without "key" is not an upload
    const stat = await fs.promises.stat(path.join(uploadsDir(store, bucket), id));
    uploads.push({ key, id, initiated: stat.mtime });
  }
  // S3's order: by key, then by initiation time.
  uploads.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.initiated - b.initiated));
  return uploads;
}

function unquote(etag) {
  return etag.trim().replace(/^W\//, '').replace(/"/g, '');
}

function addedOperations(store) {
  return async function addedOperations(ctx, next) {
    const [, bucketPart, ...keyParts] = ctx.path.split('/');
    if (!bucketPart) return next();
    const bucket = decodeURIComponent(bucketPart);
    const key = keyParts.map(decodeURIComponent).join('/');
    const query = ctx.query;
    const method = ctx.method;

    const listing = method === 'GET' && !key && 'uploads' in query;
    const onUpload = key && 'uploadId' in query && (method === 'DELETE' || method === 'POST' ||
                                                    (method === 'PUT' && 'partNumber' in query));
    const ifMatch = key && (method === 'GET' || method === 'HEAD') && ctx.get('if-match');
    if (!listing && !onUpload && !ifMatch) return next();
    if (!(await store.getBucket(bucket))) {
      throw new S3Error('NoSuchBucket', 'The specified bucket does not exist', { BucketName: bucket });
    }

    if (listing) {
      const prefix = query.prefix || '';
      const uploads = await listUploads(store, bucket, prefix);
      ctx.body = {
        ListMultipartUploadsResult: {
          '@': { xmlns: 'http://s3.amazonaws.com/doc/2006-03-01/' },
          Bucket: bucket,
          KeyMarker: '',
          UploadIdMarker: '',
          Prefix: prefix,
          MaxUploads: 1000,
          IsTruncated: false,
          Upload: uploads.map(u => ({
            Key: u.key,
            UploadId: u.id,
            StorageClass: 'STANDARD',
            Initiated: u.initiated.toISOString(),
          })),
        },
      };
      return;
    }

    if (onUpload) {
      const uploadId = String(query.uploadId);
      if ((await readUploadKey(store, bucket, uploadId)) !== key) throw noSuchUpload(uploadId);
      if (method !== 'DELETE') return next();
      await fs.promises.rm(path.join(uploadsDir(store, bucket), uploadId), { recursive: true, force: true });
      ctx.status = 204;
      return;
    }

    let metadata;
    try {
      metadata = await store.getMetadata(bucket, key);
    } catch (err) {
      if (err.code === 'ENOENT') return next(); // s3rver says NoSuchKey
      throw err;
    }
    const wanted = ifMatch.split(',').map(unquote);
    if (!wanted.includes('*') && !wanted.includes(unquote(metadata.etag))) {
      throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold',
                        { Condition: 'If-Match' });
    }
    return next();
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  fs.mkdirSync(args.directory, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: args.port,
    directory: args.directory,
    silent: true,
    configureBuckets: args.buckets.map(name => ({ name })),
  });
  server.store.putObject = makeAtomicPutObject(server.store);
  server.store.putObjectMultipart = makeCheckedPutObjectMultipart(server.store);
  const routerAt = server.middleware.findIndex(middleware => middleware.router);
  if (routerAt < 0) throw new Error("server.js: s3rver's router is not among its middleware");
  server.middleware.splice(routerAt, 0, addedOperations(server.store));

  const { port } = await server.run();
  process.stdout.write(`PORT ${port}\n`);

  const stop = () => {
    server.httpServer.closeAllConnections();
    server.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  if (args.exitWithStdin) {
    process.stdin.on('end', stop).on('error', stop).resume();
  }
}

main().catch(err => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
