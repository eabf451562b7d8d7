// Preloaded into dynalite (node --require) by StartDynalite.
//
// dynalite rethrows the error of a request whose client went away before
// sending all of it (index.js: req.on('error', function (err) { throw err })),
// and that ends the process: one client killed mid-request (a function killed
// by a fault test, a process stopped at a test's end) takes DynamoDB away from
// every later test sharing it. Such a request never arrived whole, so none of
// it was done: its error is dropped here. Any other uncaught error still ends
// the process, as it would without this file.
'use strict';

process.on('uncaughtException', (err) => {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') {
    return;
  }
  console.error(err);
  process.exit(1);
});
