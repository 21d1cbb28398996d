#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime's CPU build (npm onnxruntime-node, fetched into
// assets/tools/ort by scripts/fetch_assets.sh): Redwood's reference for numerics and speed.
//
//   node scripts/ort_run.js MODEL.onnx --input NAME=FILE.npy ... [--out DIR] [--repeat N] [--threads N]
//
// Inputs are .npy files (format 1.0/2.0, little-endian, C order; float32, float16, float64,
// int64, int32, int8, uint8, bool). The session runs once to warm up, then N timed times. Each
// output is written as DIR/<name>.npy (format 1.0; characters outside [A-Za-z0-9._-] become '_')
// when --out is given, and one JSON line goes to stdout:
//   {"outputs":[{"name":..,"shape":[..],"dtype":..,"file":..}],"latency_ms":{"p50":..,"p99":..,"runs":N}}
// Any error: a message on stderr and exit code 1.
'use strict';

const fs = require('fs');
const path = require('path');

function fail(message) {
  process.stderr.write(`ort_run: error: ${message}\n`);
  process.exit(1);
}

const usage =
  'usage: node scripts/ort_run.js MODEL.onnx --input NAME=FILE.npy ... [--out DIR] [--repeat N] [--threads N]';

function parseArgs(argv) {
  const args = { model: null, inputs: [], out: null, repeat: 1, threads: 0 };
  const positiveInt = (flag, value, min) => {
    if (value === undefined || !/^\d+$/.test(value) || Number(value) < min) {
      fail(`${flag} needs an integer >= ${min}, got '${value ?? ''}'`);
    }
    return Number(value);
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value\n${usage}`);
      return argv[++i];
    };
    if (a === '--input' || a === '-i') {
      const spec = value();
      const eq = spec.indexOf('=');
      args.inputs.push(eq < 0 ? { name: null, file: spec } : { name: spec.slice(0, eq), file: spec.slice(eq + 1) });
    } else if (a === '--out' || a === '-o') {
      args.out = value();
    } else if (a === '--repeat') {
      args.repeat = positiveInt(a, value(), 1);
    } else if (a === '--threads') {
      args.threads = positiveInt(a, value(), 0);
    } else if (a === '--help' || a === '-h') {
      process.stdout.write(usage + '\n');
      process.exit(0);
    } else if (a.startsWith('-')) {
      fail(`unknown option ${a}\n${usage}`);
    } else if (args.model === null) {
      args.model = a;
    } else {
      fail(`unexpected argument '${a}'\n${usage}`);
    }
  }
  if (args.model === null) fail(`no model given\n${usage}`);
  return args;
}

// --- .npy ---------------------------------------------------------------------------------------

// npy descr (without byte order) <-> ONNX Runtime tensor type and typed array.
const kDtypes = [
  { descr: 'f4', ort: 'float32', array: Float32Array },
  { descr: 'f2', ort: 'float16', array: Uint16Array },
  { descr: 'f8', ort: 'float64', array: Float64Array },
  { descr: 'i8', ort: 'int64', array: BigInt64Array },
  { descr: 'u8', ort: 'uint64', array: BigUint64Array },
  { descr: 'i4', ort: 'int32', array: Int32Array },
  { descr: 'u4', ort: 'uint32', array: Uint32Array },
  { descr: 'i2', ort: 'int16', array: Int16Array },
  { descr: 'u2', ort: 'uint16', array: Uint16Array },
  { descr: 'i1', ort: 'int8', array: Int8Array },
  { descr: 'u1', ort: 'uint8', array: Uint8Array },
  { descr: 'b1', ort: 'bool', array: Uint8Array },
];

function readNpy(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    fail(`cannot read ${file}: ${e.message}`);
  }
  const bad = (why) => fail(`${file}: not a valid .npy file: ${why}`);
  if (buf.length < 10 || buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') bad('bad magic');
  const major = buf[6];
  let headerLen, headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) bad('truncated header');
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    bad(`format version ${major} is not supported`);
  }
  const dataStart = headerStart + headerLen;
  if (buf.length < dataStart) bad('truncated header');
  const header = buf.toString('latin1', headerStart, dataStart);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeMatch = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeMatch) bad(`unreadable header ${JSON.stringify(header.trim())}`);
  if (fortran[1] === 'True') bad('Fortran order is not supported (save a C-contiguous array)');
  const order = descr[1][0];
  const kind = descr[1].slice(1);
  if (!['<', '|', '='].includes(order)) bad(`byte order '${order}' is not supported (little-endian only)`);
  const dtype = kDtypes.find((d) => d.descr === kind);
  if (!dtype) bad(`dtype '${descr[1]}' is not supported`);
  const shape = shapeMatch[1]
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      if (!/^\d+L?$/.test(s)) bad(`bad shape entry '${s}'`);
      return parseInt(s, 10);
    });
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = count * dtype.array.BYTES_PER_ELEMENT;
  if (buf.length - dataStart < bytes) {
    bad(`holds ${buf.length - dataStart} data bytes, shape [${shape}] of ${descr[1]} needs ${bytes}`);
  }
  // Copy into a fresh, aligned buffer: typed arrays need element-aligned offsets.
  const data = new dtype.array(count);
  Buffer.from(data.buffer).set(buf.subarray(dataStart, dataStart + bytes));
  return { dtype, shape, data };
}

function npyBytes(descr, shape, dataBytes) {
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, '\n'.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header + ' '.repeat(total - 10 - header.length - 1) + '\n';
  if (header.length > 0xffff) fail('output shape too long for a .npy 1.0 header');
  const head = Buffer.alloc(10);
  head[0] = 0x93;
  head.write('NUMPY', 1, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), dataBytes]);
}

function writeNpy(file, tensor) {
  const dtype = kDtypes.find((d) => d.ort === tensor.type);
  if (!dtype) fail(`output type '${tensor.type}' cannot be written as .npy`);
  const order = dtype.array.BYTES_PER_ELEMENT === 1 ? '|' : '<';
  const data = tensor.data;
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const tmp = `${file}.tmp.${process.pid}`;
  try {
    fs.writeFileSync(tmp, npyBytes(order + dtype.descr, tensor.dims.map(Number), bytes));
    fs.renameSync(tmp, file);
  } catch (e) {
    try {
      fs.unlinkSync(tmp);
    } catch (_) {}
    fail(`cannot write ${file}: ${e.message}`);
  }
}

// --- timing -------------------------------------------------------------------------------------

// Percentile with linear interpolation between closest ranks (numpy's default).
function percentile(sorted, p) {
  if (sorted.length === 1) return sorted[0];
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

const round3 = (x) => Math.round(x * 1000) / 1000;

// --- main ---------------------------------------------------------------------------------------

function loadOrt() {
  const assets = process.env.REDWOOD_ASSETS || path.resolve(__dirname, '..', 'assets');
  const pkg = path.resolve(assets, 'tools', 'ort', 'node_modules', 'onnxruntime-node');
  if (!fs.existsSync(path.join(pkg, 'package.json'))) {
    fail(`ONNX Runtime not found at ${pkg}: run scripts/setup.sh (or scripts/fetch_assets.sh)`);
  }
  try {
    return require(pkg);
  } catch (e) {
    fail(`cannot load ONNX Runtime from ${pkg}: ${e.message}`);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(args.model)) fail(`model ${args.model} not found`);
  const ort = loadOrt();

  const options = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    interOpNumThreads: 1,
    logSeverityLevel: 3,
  };
  if (args.threads > 0) options.intraOpNumThreads = args.threads;
  let session;
  try {
    session = await ort.InferenceSession.create(path.resolve(args.model), options);
  } catch (e) {
    fail(`cannot load ${args.model}: ${e.message}`);
  }

  // A lone unnamed --input FILE feeds a model's only input.
  for (const input of args.inputs) {
    if (input.name !== null) continue;
    if (session.inputNames.length !== 1 || args.inputs.length !== 1) {
      fail(`--input ${input.file} needs a NAME= prefix: the model's inputs are ${session.inputNames.join(', ')}`);
    }
    input.name = session.inputNames[0];
  }
  const feeds = {};
  for (const input of args.inputs) {
    if (!session.inputNames.includes(input.name)) {
      fail(`the model has no input '${input.name}'; its inputs are ${session.inputNames.join(', ')}`);
    }
    if (input.name in feeds) fail(`input '${input.name}' given twice`);
    const npy = readNpy(input.file);
    feeds[input.name] = new ort.Tensor(npy.dtype.ort, npy.data, npy.shape);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) fail(`no value given for input(s) ${missing.join(', ')} (use --input NAME=FILE.npy)`);

  const run = async () => {
    try {
      return await session.run(feeds);
    } catch (e) {
      fail(`run failed: ${e.message}`);
    }
  };
  let results = await run();  // warm-up
  const times = [];
  for (let i = 0; i < args.repeat; ++i) {
    const t0 = process.hrtime.bigint();
    results = await run();
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);

  if (args.out !== null) {
    try {
      fs.mkdirSync(args.out, { recursive: true });
    } catch (e) {
      fail(`cannot create ${args.out}: ${e.message}`);
    }
  }
  const outputs = [];
  const used = new Set();
  for (const name of session.outputNames) {
    const tensor = results[name];
    let file = null;
    if (args.out !== null) {
      let base = name.replace(/[^A-Za-z0-9._-]/g, '_') || 'output';
      while (used.has(base)) base += '_';
      used.add(base);
      file = path.join(args.out, `${base}.npy`);
      writeNpy(file, tensor);
    }
    outputs.push({ name, shape: tensor.dims.map(Number), dtype: tensor.type, file });
  }
  const latency = { p50: round3(percentile(times, 50)), p99: round3(percentile(times, 99)), runs: args.repeat };
  process.stdout.write(JSON.stringify({ outputs, latency_ms: latency }) + '\n');
  await session.release?.();
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
