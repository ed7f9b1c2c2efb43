// A real OAuth 2.1 authorization server for the MCP OAuth tests: npm oidc-provider (the version
// scripts/setup.sh pins), configured for client_credentials with RFC 8707 resource indicators and
// RFC 9068 JWT access tokens, on 127.0.0.1 only. Driven from Rust by tests/support/oidc.rs.
//
// Run with the Node 22 that scripts/setup.sh installs; oidc-provider is resolved from
// <node-dir>/node_modules (--node-dir, else $TOOLGATE_NODE_DIR, else ~/.cache/toolgate/node),
// not from beside this file.
//
// Modes:
//   provider.mjs --generate-key KID [--generate-key KID2 ...]
//     prints one JSON array line: [{"kid", "private_jwk", "public_jwk", "private_pem"}, ...],
//     fresh RSA 2048 keys (private_pem is PKCS#8), and exits.
//   provider.mjs --jwks FILE --resource URI [--resource URI2 ...] [options]
//     serves until --max-seconds (default 600) pass, SIGTERM/SIGINT, or stdin reaches EOF;
//     prints exactly one stdout line once listening: {"issuer":"http://127.0.0.1:PORT"}.
//     Options: --port P (0, the default, picks a free one), --scopes "a b c" (default
//     "notes:read notes:write books:read"), --ttl SECS (access token lifetime, default 300),
//     --clients FILE (a JSON array of client metadata replacing the built-in clients),
//     --redirect-uri URI (the public client's, default http://127.0.0.1/callback),
//     --registration (open dynamic client registration, RFC 7591, at /reg).
//
// Built-in clients: confidential client-a/secret-a and client-b/secret-b (client_credentials,
// client_secret_basic or client_secret_post, every --scopes scope), and a public client
// public-client (authorization code + PKCE S256, no secret). A client whose grant types include
// refresh_token (a dynamically registered one) gets refresh tokens. Logging in goes through
// oidc-provider's development interaction pages (any login name, no password check), which a
// test scripts as a browser would.
//
// Every --resource is a resource server whose tokens are RS256 JWTs (header typ at+jwt) with
// aud = that resource and scope = the requested scopes it knows; any other resource is
// invalid_target. A token request without `resource` gets the first --resource.
//
// Key rotation: POST /test/rotate (or SIGHUP) re-reads --jwks and builds a new Provider with
// those keys; the listening socket, port and issuer stay, and requests are handed to the new
// Provider from then on (oidc-provider cannot change its keystore after construction). The
// first key in the file signs. The rotate answer is {"kids":[...]} (the new key set), or a 500
// with {"error": ...} keeping the old keys if the file is unusable.
//
// Other output (oidc-provider's notices and warnings) goes to stderr.

import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

// oidc-provider prints notices with console.info (stdout); stdout is for the issuer line only.
console.info = (...args) => console.error(...args);

const { values: opts } = parseArgs({
  options: {
    'generate-key': { type: 'string', multiple: true },
    'node-dir': { type: 'string' },
    port: { type: 'string', default: '0' },
    jwks: { type: 'string' },
    resource: { type: 'string', multiple: true },
    scopes: { type: 'string', default: 'notes:read notes:write books:read' },
    ttl: { type: 'string', default: '300' },
    clients: { type: 'string' },
    'redirect-uri': { type: 'string', default: 'http://127.0.0.1/callback' },
    registration: { type: 'boolean', default: false },
    'max-seconds': { type: 'string', default: '600' },
  },
  strict: true,
});

function fail(message) {
  console.error(`provider.mjs: ${message}`);
  process.exit(2);
}

if (opts['generate-key']) {
  const keys = opts['generate-key'].map((kid) => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const meta = { kid, alg: 'RS256', use: 'sig' };
    return {
      kid,
      private_jwk: { ...privateKey.export({ format: 'jwk' }), ...meta },
      public_jwk: { ...publicKey.export({ format: 'jwk' }), ...meta },
      private_pem: privateKey.export({ format: 'pem', type: 'pkcs8' }),
    };
  });
  process.stdout.write(`${JSON.stringify(keys)}\n`);
  process.exit(0);
}

const nodeDir = opts['node-dir']
  || process.env.TOOLGATE_NODE_DIR
  || join(homedir(), '.cache/toolgate/node');
let Provider;
let errors;
try {
  const require = createRequire(join(nodeDir, 'package.json'));
  ({ Provider, errors } = await import(pathToFileURL(require.resolve('oidc-provider')).href));
} catch (error) {
  fail(`oidc-provider is not installed under ${nodeDir}: run scripts/setup.sh (${error.message})`);
}

const integer = (name) => {
  const value = Number(opts[name]);
  if (!Number.isInteger(value) || value < 0) fail(`--${name} must be a non-negative integer`);
  return value;
};
const port = integer('port');
const ttl = integer('ttl');
const maxSeconds = integer('max-seconds');
const scopes = opts.scopes.split(' ').filter(Boolean);
const resources = opts.resource ?? [];
if (!opts.jwks) fail('--jwks FILE is required');
if (resources.length === 0) fail('at least one --resource URI is required');

function readKeys() {
  const { keys } = JSON.parse(readFileSync(opts.jwks, 'utf8'));
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new Error(`${opts.jwks} has no keys`);
  }
  return keys;
}

function clients() {
  if (opts.clients) return JSON.parse(readFileSync(opts.clients, 'utf8'));
  const confidential = (id, secret) => ({
    client_id: id,
    client_secret: secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: scopes.join(' '),
  });
  return [
    confidential('client-a', 'secret-a'),
    confidential('client-b', 'secret-b'),
    {
      client_id: 'public-client',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: [opts['redirect-uri']],
      scope: scopes.join(' '),
    },
  ];
}

// A fresh configuration each time: the Provider constructor consumes `jwks` and `clients`.
function configuration(keys) {
  const resourceServer = (uri) => ({
    audience: uri,
    scope: scopes.join(' '),
    accessTokenFormat: 'jwt',
    accessTokenTTL: ttl,
    jwt: { sign: { alg: 'RS256' } },
  });
  return {
    jwks: { keys },
    clients: clients(),
    scopes,
    ttl: { AccessToken: ttl, ClientCredentials: ttl },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    features: {
      clientCredentials: { enabled: true },
      registration: { enabled: opts.registration },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf ?? resources[0],
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          if (resources.includes(indicator)) return resourceServer(indicator);
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        },
      },
    },
  };
}

let issuer;
let current;

function rotate() {
  const keys = readKeys();
  const next = new Provider(issuer, configuration(keys));
  next.on('server_error', (_ctx, error) => console.error('oidc-provider server_error:', error));
  current = { provider: next, handle: next.callback(), kids: keys.map((k) => k.kid) };
  console.error(`provider.mjs: signing with ${current.kids[0]}, serving ${current.kids.join(', ')}`);
  return current.kids;
}

function answer(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const server = createServer((req, res) => {
  if (req.url === '/test/rotate') {
    if (req.method !== 'POST') return answer(res, 405, { error: 'POST only' });
    req.resume();
    req.on('end', () => {
      try {
        answer(res, 200, { kids: rotate() });
      } catch (error) {
        answer(res, 500, { error: String(error?.message ?? error) });
      }
    });
    return undefined;
  }
  if (!current) return answer(res, 503, { error: 'starting' });
  return current.handle(req, res);
});

server.on('error', (error) => fail(`cannot listen on 127.0.0.1:${port}: ${error.message}`));
server.listen(port, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  try {
    rotate();
  } catch (error) {
    fail(`cannot start the provider: ${error.stack ?? error}`);
  }
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

function stop(why) {
  console.error(`provider.mjs: stopping (${why})`);
  server.closeAllConnections?.();
  server.close();
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGHUP', () => {
  try {
    rotate();
  } catch (error) {
    console.error(`provider.mjs: rotation failed, keeping the old keys: ${error.message}`);
  }
});
process.stdin.on('end', () => stop('stdin closed'));
process.stdin.on('error', () => stop('stdin error'));
process.stdin.resume();
setTimeout(() => stop(`--max-seconds ${maxSeconds}`), maxSeconds * 1000).unref();
