// One download or upload through h2gate with Node.js and undici's ProxyAgent
// (the way Node apps set a proxy: undici does not read HTTPS_PROXY by itself),
// for tests/integration/clients_test.cc. undici comes from npm
// (deploy/install-deps.sh --test puts it in /opt/h2gate-test/node; NODE_PATH).
//
//   node client.js get URL OUT_FILE CA_FILE PROXY_URL
//   node client.js put URL IN_FILE CA_FILE PROXY_URL   (prints the response body)
'use strict';
const fs = require('fs');
const { ProxyAgent, request } = require('undici');

async function main() {
  const [op, url, path, caFile, proxy] = process.argv.slice(2);
  const ca = fs.readFileSync(caFile);
  const dispatcher = new ProxyAgent({ uri: proxy, requestTls: { ca } });
  const opts = { dispatcher, method: op === 'get' ? 'GET' : 'PUT' };
  if (op === 'put') {
    opts.body = fs.createReadStream(path);
    opts.headers = { 'content-length': String(fs.statSync(path).size) };
  }
  const res = await request(url, opts);
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`HTTP ${res.statusCode}`);
  }
  if (op === 'get') {
    const out = fs.createWriteStream(path);
    for await (const chunk of res.body) {
      if (!out.write(chunk)) await new Promise((r) => out.once('drain', r));
    }
    await new Promise((r, j) => out.end((e) => (e ? j(e) : r())));
  } else {
    process.stdout.write(await res.body.text());
  }
  await dispatcher.close();
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
