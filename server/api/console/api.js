// api.js — the console's calls to the server's JSON API. The session is an
// HttpOnly cookie the browser sends by itself. The CSRF token, which the
// server hands out at sign-in only, is kept in sessionStorage: this tab and
// this origin (with its port) only, so a reload keeps it and another port
// of the host never sees it. It is sent with every state-changing request.

const CSRF_KEY = 'ldpref_console_csrf';
let csrfToken = sessionStorage.getItem(CSRF_KEY);

export class ApiError extends Error {
  constructor(status, name, message) {
    super(message);
    this.status = status;
    this.name = name;
  }
}

async function request(method, path, body, contentType) {
  const headers = {};
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  if (body !== undefined) headers['Content-Type'] = contentType || 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers, credentials: 'same-origin', cache: 'no-store',
      body: body === undefined ? undefined
        : typeof body === 'string' ? body : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'network', 'the server cannot be reached: ' + e.message);
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const name = data && data.error ? data.error : 'http_' + res.status;
    const message = data && data.message ? data.message : res.statusText;
    throw new ApiError(res.status, name, message);
  }
  return data;
}

export const get = (path) => request('GET', path);
export const post = (path, body, contentType) => request('POST', path, body, contentType);
export const put = (path, body) => request('PUT', path, body);

// GET of an endpoint this server may not offer (an older server): null
// when it answers not_found or method_not_allowed.
export async function optional(path) {
  try {
    return await request('GET', path);
  } catch (e) {
    if (e.name === 'not_found' || e.name === 'method_not_allowed') return null;
    throw e;
  }
}

// Signs in with an operator token; the server sets the session cookie.
export async function signIn(token) {
  const s = await request('POST', '/v1/console/session', { token });
  csrfToken = s.csrf_token;
  sessionStorage.setItem(CSRF_KEY, csrfToken);
  return s;
}

// True when this tab is signed in: the session cookie is live and the tab
// holds its CSRF token (a new tab signs in again).
export async function resume() {
  if (!csrfToken) return false;
  try {
    await request('GET', '/v1/console/session');
    return true;
  } catch (e) {
    if (e.status === 401) { forget(); return false; }
    throw e;
  }
}

export function forget() {
  csrfToken = null;
  sessionStorage.removeItem(CSRF_KEY);
}

export async function signOut() {
  try {
    await request('DELETE', '/v1/console/session');
  } finally {
    forget();
  }
}

// Query string of an object's defined values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}
