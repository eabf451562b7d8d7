// sfn-local: a local AWS Step Functions endpoint for nodetide's tests and
// local mode.
//
// It speaks the service's JSON 1.0 protocol (POST /, X-Amz-Target:
// AWSStepFunctions.<Operation>), so the real AWS SDKs work against it, and
// interprets state machines with aws-local-stepfunctions. Task states whose
// Resource is a Lambda function ARN are sent to local Lambda Runtime Interface
// Emulators (RIE), load-balanced over the idle instances of that function,
// and a function error becomes a task failure named by its errorType, so
// Retry and Catch on typed errors behave as on AWS.
//
// Usage:
//   node hack/sfn-local/server.mjs [--config FILE] [--host H] [--port P]
//     [--state-machine NAME=FILE]... [--substitute KEY=VALUE]...
//     [--function NAME=URL[,URL]...]... [--wait-seconds-max N]
//
// --config names a JSON file with the same settings:
//   {"region": "us-east-1", "accountId": "123456789012", "waitSecondsMax": 0.1,
//    "functions": {"drain": {"endpoints": ["http://127.0.0.1:9000"], "timeoutSeconds": 300}},
//    "stateMachines": [{"name": "drain", "definitionFile": "asl.json",
//                       "substitutions": {"Key": "value"}}]}
// A state machine file may hold ${Key} placeholders, replaced as CDK's
// DefinitionSubstitutions do. Every function NAME also provides
// ${<Name>FunctionArn} (NAME in CamelCase: "drain" gives ${DrainFunctionArn},
// "nodetide-drain" ${NodetideDrainFunctionArn}) unless given explicitly.
// --substitute applies to the --state-machine files.
//
// --wait-seconds-max caps every Wait state and every Retry pause at N seconds
// (fractions allowed), so loops that wait 10 s on AWS run fast in tests.
//
// It prints "listening on http://HOST:PORT" on stdout once it serves (port 0,
// the default, picks a free one); everything else goes to stderr.

import './polyfill.cjs';

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';

// Task states always get a local handler, so the interpreter never builds its
// own Lambda client. Should that ever change, its calls must not leave this
// machine: point the JS SDK's Lambda endpoint at a closed local port.
process.env.AWS_ENDPOINT_URL_LAMBDA = 'http://127.0.0.1:9';

const { StateMachine } = await import('aws-local-stepfunctions');

const log = (msg) => process.stderr.write(`sfn-local: ${msg}\n`);

// ---------------------------------------------------------------- settings

function loadSettings(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '0' },
      region: { type: 'string' },
      'account-id': { type: 'string' },
      'state-machine': { type: 'string', multiple: true, default: [] },
      substitute: { type: 'string', multiple: true, default: [] },
      function: { type: 'string', multiple: true, default: [] },
      'wait-seconds-max': { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const cfg = values.config ? JSON.parse(readFileSync(values.config, 'utf8')) : {};
  const settings = {
    host: values.host,
    port: Number(values.port),
    verbose: values.verbose,
    region: values.region ?? cfg.region ?? 'us-east-1',
    accountId: values['account-id'] ?? cfg.accountId ?? '123456789012',
    waitSecondsMax: cfg.waitSecondsMax ?? null,
    functions: new Map(),
    stateMachines: [...(cfg.stateMachines ?? [])],
  };
  if (values['wait-seconds-max'] !== undefined) {
    settings.waitSecondsMax = Number(values['wait-seconds-max']);
  }
  if (settings.waitSecondsMax !== null && !(settings.waitSecondsMax >= 0)) {
    throw new Error(`wait-seconds-max must be a number of seconds >= 0, not ${settings.waitSecondsMax}`);
  }
  for (const [name, f] of Object.entries(cfg.functions ?? {})) {
    settings.functions.set(name, { endpoints: f.endpoints ?? [], timeoutSeconds: f.timeoutSeconds ?? 300 });
  }
  for (const spec of values.function) {
    const [name, urls] = splitPair(spec, '--function');
    settings.functions.set(name, { endpoints: urls.split(',').filter(Boolean), timeoutSeconds: 300 });
  }
  const subs = Object.fromEntries(values.substitute.map((s) => splitPair(s, '--substitute')));
  for (const spec of values['state-machine']) {
    const [name, file] = splitPair(spec, '--state-machine');
    settings.stateMachines.push({ name, definitionFile: file, substitutions: subs });
  }
  for (const [name, f] of settings.functions) {
    if (f.endpoints.length === 0) throw new Error(`function ${name} has no endpoints`);
  }
  return settings;
}

function splitPair(spec, flag) {
  const i = spec.indexOf('=');
  if (i <= 0) throw new Error(`${flag} wants NAME=VALUE, got ${JSON.stringify(spec)}`);
  return [spec.slice(0, i), spec.slice(i + 1)];
}

// functionArnKey names the substitution that carries a function's ARN.
function functionArnKey(name) {
  const camel = name
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join('');
  return `${camel}FunctionArn`;
}

// substitute fills ${Key} placeholders the way CloudFormation's
// DefinitionSubstitutions do (plain text replacement) and refuses a
// definition that still has any, since AWS would reject it as well.
function substitute(text, subs, what) {
  let out = text;
  for (const [key, value] of Object.entries(subs)) {
    out = out.replaceAll('${' + key + '}', String(value));
  }
  const left = [...new Set([...out.matchAll(/\$\{([^}]*)\}/g)].map((m) => m[0]))];
  if (left.length > 0) {
    throw new Error(`${what}: no substitution for ${left.join(', ')}`);
  }
  return out;
}

// ------------------------------------------------------------ errors (API)

class ApiError extends Error {
  constructor(type, message, status = 400) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

// ----------------------------------------------------------- Lambda (RIE)

// FunctionPool is one function's RIE instances. An RIE runs one invocation at
// a time, so each invocation takes an idle instance (the one idle longest,
// which spreads work over all of them) or queues until one is released.
class FunctionPool {
  constructor(name, endpoints, timeoutSeconds) {
    this.name = name;
    this.timeoutSeconds = timeoutSeconds;
    this.instances = endpoints.map((url) => ({ url: url.replace(/\/+$/, ''), busy: false, releasedAt: 0 }));
    this.waiters = [];
  }

  acquire() {
    const idle = this.instances.filter((i) => !i.busy).sort((a, b) => a.releasedAt - b.releasedAt)[0];
    if (idle) {
      idle.busy = true;
      return Promise.resolve(idle);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(instance) {
    instance.releasedAt = performance.now();
    const next = this.waiters.shift();
    if (next) {
      next(instance);
    } else {
      instance.busy = false;
    }
  }
}

const invokePath = '/2015-03-31/functions/function/invocations';
// A fresh connection per invocation: an RIE that reset after a function
// timeout or crash may have dropped an idle kept-alive one.
const rieAgent = new http.Agent({ keepAlive: false });

function post(url, body, timeoutMs) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: rieAgent,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    // The function's own timeout ends a hung invocation; this only guards
    // against an RIE that stopped answering altogether.
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on('error', reject);
    req.end(body);
  });
}

// isFunctionError tells a function's error answer from its result. The RIE
// answers both with HTTP 200 and sets no X-Amz-Function-Error header, so the
// shape decides: an object holding errorType and nothing but the fields of
// Lambda's error object.
function isFunctionError(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof v.errorType !== 'string') {
    return false;
  }
  return Object.keys(v).every((k) => ['errorType', 'errorMessage', 'stackTrace', 'errorData'].includes(k));
}

// invokeFunction runs one invocation on an instance and classifies the answer
// as Step Functions does: the error name is the function's errorType and the
// cause its whole error object as JSON; the RIE failing is
// Lambda.ServiceException.
async function invokeFunction(pool, instance, payload) {
  let res;
  try {
    res = await post(instance.url + invokePath, payload, (pool.timeoutSeconds + 30) * 1000);
  } catch (err) {
    return {
      ok: false,
      error: 'Lambda.ServiceException',
      cause: `function ${pool.name}: invoking ${instance.url} failed: ${err.message}`,
    };
  }
  let parsed;
  try {
    parsed = JSON.parse(res.text);
  } catch {
    parsed = undefined;
  }
  if (isFunctionError(parsed)) {
    return { ok: false, error: parsed.errorType, cause: res.text };
  }
  if (res.status === 200 && parsed !== undefined) {
    return { ok: true, value: parsed };
  }
  if (res.status === 200 && res.text.startsWith('Task timed out after')) {
    // The RIE reports a function timeout as plain text; Lambda as this error.
    const error = 'Sandbox.Timedout';
    return { ok: false, error, cause: JSON.stringify({ errorType: error, errorMessage: res.text.trim() }) };
  }
  return {
    ok: false,
    error: 'Lambda.ServiceException',
    cause: `function ${pool.name} at ${instance.url} answered HTTP ${res.status}: ${res.text.slice(0, 1000)}`,
  };
}

// taskFailure is what a Task's local handler throws: the interpreter matches
// Retry and Catch against the error's name and passes its message on as the
// Cause.
function taskFailure(error, cause) {
  const err = new Error(cause);
  err.name = error;
  return err;
}

// Lambda function ARNs, optionally with a version or alias qualifier.
const functionArnPattern = /^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:([A-Za-z0-9_-]+)(?::[A-Za-z0-9$_-]+)?$/;

// ----------------------------------------------------------- the service

class Service {
  constructor(settings) {
    this.settings = settings;
    this.region = settings.region;
    this.accountId = settings.accountId;
    this.waitCapMs = settings.waitSecondsMax === null ? null : settings.waitSecondsMax * 1000;
    this.functions = new Map();
    for (const [name, f] of settings.functions) {
      this.functions.set(name, new FunctionPool(name, f.endpoints, f.timeoutSeconds));
    }
    this.stateMachines = new Map(); // by ARN
    this.executions = new Map(); // by ARN
  }

  stateMachineArn(name) {
    return `arn:aws:states:${this.region}:${this.accountId}:stateMachine:${name}`;
  }

  executionArn(smName, name) {
    return `arn:aws:states:${this.region}:${this.accountId}:execution:${smName}:${name}`;
  }

  functionArn(name) {
    return `arn:aws:lambda:${this.region}:${this.accountId}:function:${name}`;
  }

  // loadFile registers a state machine given at start-up.
  loadFile({ name, definitionFile, substitutions = {} }) {
    const subs = {};
    for (const fn of this.functions.keys()) subs[functionArnKey(fn)] = this.functionArn(fn);
    Object.assign(subs, substitutions);
    const text = substitute(readFileSync(definitionFile, 'utf8'), subs, definitionFile);
    const sm = this.register(name, text, `arn:aws:iam::${this.accountId}:role/sfn-local`, 'STANDARD');
    log(`state machine ${name} (${definitionFile}): ${sm.arn}`);
    return sm;
  }

  register(name, definitionText, roleArn, type) {
    checkName(name, 'state machine');
    let definition;
    try {
      definition = JSON.parse(definitionText);
    } catch (err) {
      throw new ApiError('InvalidDefinition', `Invalid State Machine Definition: not JSON: ${err.message}`);
    }
    const arn = this.stateMachineArn(name);
    const existing = this.stateMachines.get(arn);
    if (existing) {
      if (existing.definitionText === definitionText && existing.roleArn === roleArn) return existing;
      throw new ApiError('StateMachineAlreadyExists', `State Machine Already Exists: '${arn}'`);
    }
    // The interpreter gets its own copy: Task states without a timeout get
    // one as long as timers allow (its default is 60 s; AWS has none, the
    // function's own timeout applies).
    const runnable = structuredClone(definition);
    const states = new Map();
    collectStates(runnable, states);
    const untimedTasks = new Set();
    for (const [stateName, st] of states) {
      if (st.Type === 'Task' && st.TimeoutSeconds === undefined && st.TimeoutSecondsPath === undefined) {
        st.TimeoutSeconds = 2147483; // setTimeout's limit, ~24.8 days
        untimedTasks.add(stateName);
      }
    }
    let machine;
    try {
      machine = new StateMachine(runnable, {
        awsConfig: {
          region: this.region,
          credentials: { accessKeys: { accessKeyId: 'sfn-local', secretAccessKey: 'sfn-local' } },
        },
      });
    } catch (err) {
      throw new ApiError('InvalidDefinition', `Invalid State Machine Definition: ${err.message}`);
    }
    for (const [stateName, st] of states) {
      const target = st.Type === 'Task' ? this.resolveResource(st.Resource) : { pool: true };
      if (!target.pool) log(`warning: ${name}: Task state ${stateName} will fail: ${target.cause}`);
    }
    const sm = {
      name,
      arn,
      definitionText,
      roleArn,
      type,
      creationDate: nowSeconds(),
      machine,
      states,
      untimedTasks,
    };
    this.stateMachines.set(arn, sm);
    return sm;
  }

  resolveResource(resource) {
    const m = functionArnPattern.exec(resource ?? '');
    if (!m) {
      return {
        error: 'States.Runtime',
        cause: `sfn-local runs Task states only on Lambda function ARNs, not ${JSON.stringify(resource)}`,
      };
    }
    const pool = this.functions.get(m[1]);
    if (!pool) {
      return {
        error: 'Lambda.ResourceNotFoundException',
        cause: `Function not found: ${resource} (sfn-local runs: ${[...this.functions.keys()].join(', ') || 'none'})`,
      };
    }
    return { pool };
  }

  stateMachine(arn) {
    const sm = this.stateMachines.get(arn);
    if (!sm) {
      checkArn(arn, 'stateMachine');
      throw new ApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
    }
    return sm;
  }

  execution(arn) {
    const ex = this.executions.get(arn);
    if (!ex) {
      checkArn(arn, 'execution');
      throw new ApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${arn}'`);
    }
    return ex;
  }

  // ------------------------------------------------------ executions

  start(sm, name, inputText) {
    checkName(name, 'execution');
    let input;
    try {
      input = JSON.parse(inputText);
    } catch (err) {
      throw new ApiError('InvalidExecutionInput', `Invalid execution input: ${err.message}`);
    }
    const arn = this.executionArn(sm.name, name);
    const existing = this.executions.get(arn);
    if (existing) {
      // StartExecution is idempotent only while the first execution runs
      // and only for the same input; a closed name can't be reused.
      if (existing.status === 'RUNNING' && existing.inputText === inputText) return existing;
      throw new ApiError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
    }
    const ex = {
      arn,
      name,
      sm,
      inputText,
      status: 'RUNNING',
      startDate: nowSeconds(),
      stopDate: undefined,
      output: undefined,
      error: undefined,
      cause: undefined,
      history: [],
      closed: false,
      lastEntered: undefined,
      retries: new Map(), // state name -> attempts so far, per retrier
      inflight: new Map(), // Task state name -> token of its running invocation
      abort: () => {},
    };
    this.executions.set(arn, ex);
    record(ex, 'ExecutionStarted', 'executionStartedEventDetails', {
      input: inputText,
      inputDetails: { truncated: false },
      roleArn: sm.roleArn,
    });
    const run = sm.machine.run(input, {
      overrides: this.overrides(ex),
      noThrowOnAbort: true,
      context: {
        Execution: { Id: arn, Name: name, RoleArn: sm.roleArn },
        StateMachine: { Id: sm.arn, Name: sm.name },
      },
    });
    ex.abort = run.abort;
    this.consume(ex, run.eventLogs);
    // The event log is the source of truth for how the run ended; this is
    // only a net should it end without a final event.
    run.result.then(
      (output) => setImmediate(() => this.finish(ex, 'SUCCEEDED', { output: json(output) })),
      (err) => {
        const cause = err?.cause ?? err;
        setImmediate(() => this.finish(ex, 'FAILED', { error: cause?.name, cause: cause?.message }));
      },
    );
    log(`execution ${sm.name}/${name} started`);
    return ex;
  }

  stop(ex, error, cause) {
    if (ex.status !== 'RUNNING') return;
    this.finish(ex, 'ABORTED', { error, cause });
    ex.abort();
  }

  finish(ex, status, { output, error, cause }) {
    if (ex.status !== 'RUNNING') return;
    ex.status = status;
    ex.stopDate = nowSeconds();
    ex.output = output;
    ex.error = error ?? undefined;
    ex.cause = cause ?? undefined;
    const failure = { error: ex.error, cause: ex.cause };
    switch (status) {
      case 'SUCCEEDED':
        record(ex, 'ExecutionSucceeded', 'executionSucceededEventDetails', {
          output,
          outputDetails: { truncated: false },
        });
        break;
      case 'FAILED':
        record(ex, 'ExecutionFailed', 'executionFailedEventDetails', failure);
        break;
      case 'TIMED_OUT':
        record(ex, 'ExecutionTimedOut', 'executionTimedOutEventDetails', failure);
        break;
      case 'ABORTED':
        record(ex, 'ExecutionAborted', 'executionAbortedEventDetails', failure);
        break;
    }
    ex.closed = true;
    log(`execution ${ex.sm.name}/${ex.name} ${status}${ex.error ? ` (${ex.error})` : ''}`);
  }

  // overrides builds one execution's interpreter overrides: every Task state
  // runs through invokeTask, and with a wait cap, Wait states and Retry
  // pauses are capped. The values are getters, read when a state runs.
  overrides(ex) {
    const taskResourceLocalHandlers = {};
    const waitTimeOverrides = {};
    const retryIntervalOverrides = {};
    for (const [name, st] of ex.sm.states) {
      if (st.Type === 'Task') {
        taskResourceLocalHandlers[name] = (input) => this.invokeTask(ex, name, st, input);
      }
      if (this.waitCapMs === null) continue;
      if (st.Type === 'Wait') {
        Object.defineProperty(waitTimeOverrides, name, { enumerable: true, get: () => this.cappedWait(st) });
      }
      if (Array.isArray(st.Retry) && st.Retry.length > 0) {
        Object.defineProperty(retryIntervalOverrides, name, {
          enumerable: true,
          get: () => this.cappedRetries(ex, name, st),
        });
      }
    }
    return { taskResourceLocalHandlers, waitTimeOverrides, retryIntervalOverrides };
  }

  // cappedWait returns the override for a Wait state in milliseconds, or
  // undefined to wait as defined. SecondsPath and TimestampPath depend on the
  // state's input, which the interpreter doesn't hand to overrides, so those
  // wait exactly the cap.
  cappedWait(st) {
    const cap = this.waitCapMs;
    if (st.Seconds !== undefined) return st.Seconds * 1000 > cap ? cap : undefined;
    if (st.Timestamp !== undefined) return Date.parse(st.Timestamp) - Date.now() > cap ? cap : undefined;
    return cap;
  }

  // cappedRetries returns a Retry override per retrier: the cap where the
  // next pause (IntervalSeconds × BackoffRate^attempts, at most
  // MaxDelaySeconds) would exceed it, else -1 (pause as defined).
  cappedRetries(ex, name, st) {
    const attempts = ex.retries.get(name) ?? [];
    return st.Retry.map((r, i) => {
      const pauseSeconds = Math.min(
        (r.IntervalSeconds ?? 1) * Math.pow(r.BackoffRate ?? 2, attempts[i] ?? 0),
        r.MaxDelaySeconds ?? Infinity,
      );
      return pauseSeconds * 1000 > this.waitCapMs ? this.waitCapMs : -1;
    });
  }

  async invokeTask(ex, stateName, st, input) {
    // One macrotask first: the event consumer then has recorded everything
    // the interpreter emitted before this call (the TaskStateEntered, an
    // earlier attempt's end), which keeps the history in order.
    await new Promise((resolve) => setImmediate(resolve));
    const { pool, error, cause } = this.resolveResource(st.Resource);
    if (!pool) {
      record(ex, 'LambdaFunctionScheduleFailed', 'lambdaFunctionScheduleFailedEventDetails', { error, cause });
      throw taskFailure(error, cause);
    }
    const payload = json(input);
    const token = Symbol(stateName);
    ex.inflight.set(stateName, token);
    const live = () => ex.inflight.get(stateName) === token && !ex.closed;
    record(ex, 'LambdaFunctionScheduled', 'lambdaFunctionScheduledEventDetails', {
      resource: st.Resource,
      input: payload,
      inputDetails: { truncated: false },
      ...(!ex.sm.untimedTasks.has(stateName) && { timeoutInSeconds: st.TimeoutSeconds }),
    });
    const instance = await pool.acquire();
    let outcome;
    try {
      if (ex.status !== 'RUNNING') {
        // Stopped while queued: don't start the function at all.
        throw taskFailure('States.Runtime', 'execution stopped');
      }
      if (live()) record(ex, 'LambdaFunctionStarted');
      outcome = await invokeFunction(pool, instance, payload);
    } finally {
      pool.release(instance);
    }
    if (live()) {
      ex.inflight.delete(stateName);
      if (outcome.ok) {
        record(ex, 'LambdaFunctionSucceeded', 'lambdaFunctionSucceededEventDetails', {
          output: json(outcome.value),
          outputDetails: { truncated: false },
        });
      } else {
        record(ex, 'LambdaFunctionFailed', 'lambdaFunctionFailedEventDetails', {
          error: outcome.error,
          cause: outcome.cause,
        });
      }
    }
    if (!outcome.ok) {
      log(`execution ${ex.sm.name}/${ex.name}: ${stateName}: ${outcome.error}: ${outcome.cause}`);
      throw taskFailure(outcome.error, outcome.cause);
    }
    return outcome.value;
  }

  async consume(ex, events) {
    try {
      for await (const ev of events) this.onEvent(ex, ev);
    } catch (err) {
      log(`execution ${ex.sm.name}/${ex.name}: reading its events: ${err.stack ?? err}`);
    }
  }

  // onEvent turns the interpreter's events into Step Functions history
  // events. Its StateFailed/StateRetried/StateCaught have no counterpart in
  // the real history and only feed the retry cap and task timeouts.
  onEvent(ex, ev) {
    const name = ev.state?.name;
    switch (ev.type) {
      case 'StateEntered':
        ex.lastEntered = name;
        ex.retries.set(name, []);
        record(ex, `${ev.state.type}StateEntered`, 'stateEnteredEventDetails', {
          name,
          input: json(ev.state.input),
          inputDetails: { truncated: false },
        });
        break;
      case 'StateExited':
        record(ex, `${ev.state.type}StateExited`, 'stateExitedEventDetails', {
          name,
          output: json(ev.state.output),
          outputDetails: { truncated: false },
        });
        break;
      case 'StateRetried': {
        const st = ex.sm.states.get(name);
        const i = st?.Retry?.indexOf(ev.retry.retrier) ?? -1;
        if (i >= 0) {
          const attempts = ex.retries.get(name) ?? [];
          attempts[i] = ev.retry.attempt;
          ex.retries.set(name, attempts);
        }
        break;
      }
      case 'StateFailed':
        if (ev.state.type === 'Task' && ev.Error === 'States.Timeout' && ex.inflight.has(name)) {
          ex.inflight.delete(name);
          record(ex, 'LambdaFunctionTimedOut', 'lambdaFunctionTimedOutEventDetails', {
            error: 'States.Timeout',
            cause: `Task state ${name} ran longer than its TimeoutSeconds`,
          });
        }
        break;
      case 'MapIterationStarted':
      case 'MapIterationSucceeded':
      case 'MapIterationFailed': {
        const key = ev.type[0].toLowerCase() + ev.type.slice(1) + 'EventDetails';
        record(ex, ev.type, key, { name: ev.parentState.name, index: ev.index });
        break;
      }
      case 'ExecutionSucceeded':
        this.finish(ex, 'SUCCEEDED', { output: json(ev.output) });
        break;
      case 'ExecutionFailed':
        this.finish(ex, 'FAILED', this.failure(ex, ev.Error, ev.Cause));
        break;
      case 'ExecutionTimeout':
        this.finish(ex, 'TIMED_OUT', {
          error: 'States.Timeout',
          cause: `The execution ran longer than the state machine's TimeoutSeconds`,
        });
        break;
      default:
        // ExecutionStarted and ExecutionAborted are recorded by start and
        // stop; Parallel branch events have no counterpart in the history.
        break;
    }
  }

  // failure maps the interpreter's failure to Step Functions': a Fail state
  // without Error (or Cause) leaves it empty instead of the interpreter's
  // placeholder.
  failure(ex, error, cause) {
    let c = cause;
    if (c !== undefined && typeof c !== 'string') c = JSON.stringify(c);
    let e = error;
    const st = ex.sm.states.get(ex.lastEntered);
    if (st?.Type === 'Fail') {
      if (st.Error === undefined && st.ErrorPath === undefined) e = undefined;
      if (st.Cause === undefined && st.CausePath === undefined) c = undefined;
    }
    return { error: e, cause: c };
  }
}

// collectStates maps every state name, nested ones included (ASL state names
// are unique across the whole machine), to its definition.
function collectStates(def, out) {
  for (const [name, st] of Object.entries(def?.States ?? {})) {
    out.set(name, st);
    for (const branch of st.Branches ?? []) collectStates(branch, out);
    if (st.Iterator) collectStates(st.Iterator, out);
    if (st.ItemProcessor) collectStates(st.ItemProcessor, out);
  }
}

function record(ex, type, detailsKey, details) {
  if (ex.closed) return;
  const id = ex.history.length + 1;
  const ev = { timestamp: nowSeconds(), type, id, previousEventId: id - 1 };
  if (detailsKey) ev[detailsKey] = details;
  ex.history.push(ev);
}

// Dates travel as epoch seconds, as the JSON protocol encodes timestamps.
const nowSeconds = () => Date.now() / 1000;

const json = (v) => JSON.stringify(v === undefined ? null : v);

// checkName applies Step Functions' rules for state machine and execution
// names.
function checkName(name, what) {
  // eslint-disable-next-line no-control-regex
  const bad = /[\s<>{}[\]?*"#%\\^|~`$&,;:/\u0000-\u001f\u007f-\u009f]/;
  if (typeof name !== 'string' || name.length < 1 || name.length > 80 || bad.test(name)) {
    throw new ApiError('InvalidName', `Invalid Name: '${name}' is not a valid ${what} name`);
  }
}

function checkArn(arn, kind) {
  if (typeof arn !== 'string' || !arn.startsWith('arn:') || !arn.includes(`:${kind}:`)) {
    throw new ApiError('InvalidArn', `Invalid Arn: '${arn}'`);
  }
}

function required(req, field) {
  if (req[field] === undefined || req[field] === null || req[field] === '') {
    throw new ApiError('ValidationException', `1 validation error detected: '${field}' must not be null`);
  }
  return req[field];
}

// page slices a list for the List*/GetExecutionHistory operations; the
// token is the offset of the next item.
function page(items, req) {
  const max = req.maxResults > 0 ? Math.min(req.maxResults, 1000) : 100;
  let start = 0;
  if (req.nextToken) {
    start = Number.parseInt(Buffer.from(String(req.nextToken), 'base64url').toString(), 10);
    if (!Number.isInteger(start) || start < 0) throw new ApiError('InvalidToken', 'Invalid Token');
  }
  const slice = items.slice(start, start + max);
  const next = start + max < items.length ? Buffer.from(String(start + max)).toString('base64url') : undefined;
  return { slice, nextToken: next };
}

function describeExecution(ex) {
  return {
    executionArn: ex.arn,
    stateMachineArn: ex.sm.arn,
    name: ex.name,
    status: ex.status,
    startDate: ex.startDate,
    stopDate: ex.stopDate,
    input: ex.inputText,
    inputDetails: { included: true },
    output: ex.status === 'SUCCEEDED' ? ex.output : undefined,
    outputDetails: ex.status === 'SUCCEEDED' ? { included: true } : undefined,
    error: ex.error,
    cause: ex.cause,
  };
}

// stripData drops inputs and outputs from history events
// (includeExecutionData: false).
function stripData(ev) {
  const out = { ...ev };
  for (const [k, v] of Object.entries(out)) {
    if (k.endsWith('EventDetails') && v && typeof v === 'object') {
      const { input, inputDetails, output, outputDetails, ...rest } = v;
      out[k] = rest;
    }
  }
  return out;
}

// -------------------------------------------------------------- operations

const operations = {
  CreateStateMachine(svc, req) {
    const type = req.type ?? 'STANDARD';
    const sm = svc.register(
      required(req, 'name'),
      required(req, 'definition'),
      req.roleArn ?? `arn:aws:iam::${svc.accountId}:role/sfn-local`,
      type,
    );
    log(`state machine ${sm.name} created: ${sm.arn}`);
    return { stateMachineArn: sm.arn, creationDate: sm.creationDate };
  },
  DescribeStateMachine(svc, req) {
    const sm = svc.stateMachine(required(req, 'stateMachineArn'));
    return {
      stateMachineArn: sm.arn,
      name: sm.name,
      status: 'ACTIVE',
      definition: sm.definitionText,
      roleArn: sm.roleArn,
      type: sm.type,
      creationDate: sm.creationDate,
    };
  },
  ListStateMachines(svc, req) {
    const all = [...svc.stateMachines.values()].sort((a, b) => a.name.localeCompare(b.name));
    const { slice, nextToken } = page(all, req);
    return {
      stateMachines: slice.map((sm) => ({
        stateMachineArn: sm.arn,
        name: sm.name,
        type: sm.type,
        creationDate: sm.creationDate,
      })),
      nextToken,
    };
  },
  DeleteStateMachine(svc, req) {
    const arn = required(req, 'stateMachineArn');
    checkArn(arn, 'stateMachine');
    svc.stateMachines.delete(arn); // running executions carry on, as on AWS
    return {};
  },
  StartExecution(svc, req) {
    const sm = svc.stateMachine(required(req, 'stateMachineArn'));
    const ex = svc.start(sm, req.name ?? randomUUID(), req.input ?? '{}');
    return { executionArn: ex.arn, startDate: ex.startDate };
  },
  DescribeExecution(svc, req) {
    return describeExecution(svc.execution(required(req, 'executionArn')));
  },
  ListExecutions(svc, req) {
    const sm = svc.stateMachine(required(req, 'stateMachineArn'));
    const all = [...svc.executions.values()]
      .filter((ex) => ex.sm === sm && (!req.statusFilter || ex.status === req.statusFilter))
      .reverse(); // newest first, as AWS lists them
    const { slice, nextToken } = page(all, req);
    return {
      executions: slice.map((ex) => ({
        executionArn: ex.arn,
        stateMachineArn: sm.arn,
        name: ex.name,
        status: ex.status,
        startDate: ex.startDate,
        stopDate: ex.stopDate,
      })),
      nextToken,
    };
  },
  StopExecution(svc, req) {
    const ex = svc.execution(required(req, 'executionArn'));
    svc.stop(ex, req.error, req.cause);
    return { stopDate: ex.stopDate };
  },
  GetExecutionHistory(svc, req) {
    const ex = svc.execution(required(req, 'executionArn'));
    let events = ex.history;
    if (req.reverseOrder) events = [...events].reverse();
    if (req.includeExecutionData === false) events = events.map(stripData);
    const { slice, nextToken } = page(events, req);
    return { events: slice, nextToken };
  },
};

// ------------------------------------------------------------------ server

function serve(svc, host, port) {
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const requestId = randomUUID();
      const reply = (status, body) => {
        const text = JSON.stringify(body);
        res.writeHead(status, {
          'Content-Type': 'application/x-amz-json-1.0',
          'Content-Length': Buffer.byteLength(text),
          'x-amzn-RequestId': requestId,
        });
        res.end(text);
      };
      if (req.method !== 'POST') {
        reply(200, { service: 'sfn-local' });
        return;
      }
      const target = String(req.headers['x-amz-target'] ?? '');
      const opName = target.startsWith('AWSStepFunctions.') ? target.slice('AWSStepFunctions.'.length) : '';
      const op = Object.hasOwn(operations, opName) ? operations[opName] : undefined;
      try {
        if (!op) throw new ApiError('UnknownOperationException', `Unknown operation ${JSON.stringify(target)}`);
        let body;
        try {
          const text = Buffer.concat(chunks).toString('utf8');
          body = text.trim() === '' ? {} : JSON.parse(text);
        } catch (err) {
          throw new ApiError('SerializationException', `request body is not JSON: ${err.message}`);
        }
        const out = op(svc, body ?? {});
        if (svc.settings.verbose) log(`${opName} ok`);
        reply(200, out);
      } catch (err) {
        if (err instanceof ApiError) {
          if (svc.settings.verbose) log(`${opName}: ${err.type}: ${err.message}`);
          reply(err.status, { __type: err.type, message: err.message });
        } else {
          log(`${opName}: internal error: ${err.stack ?? err}`);
          reply(500, { __type: 'InternalServerError', message: String(err.message ?? err) });
        }
      }
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

async function main() {
  const settings = loadSettings(process.argv.slice(2));
  const svc = new Service(settings);
  for (const spec of settings.stateMachines) svc.loadFile(spec);
  for (const [name, pool] of svc.functions) {
    log(`function ${name}: ${svc.functionArn(name)} on ${pool.instances.map((i) => i.url).join(', ')}`);
  }
  if (svc.waitCapMs !== null) log(`Wait states and Retry pauses capped at ${settings.waitSecondsMax} s`);
  const server = await serve(svc, settings.host, settings.port);
  const { address, port } = server.address();
  const shown = address.includes(':') ? `[${address}]` : address;
  process.stdout.write(`listening on http://${shown}:${port}\n`);
  const shutdown = (sig) => {
    log(`stopping on ${sig}`);
    server.close();
    process.exit(0);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

main().catch((err) => {
  log(`fatal: ${err instanceof ApiError ? `${err.type}: ${err.message}` : (err.stack ?? err)}`);
  process.exit(1);
});
