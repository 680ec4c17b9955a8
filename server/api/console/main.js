// main.js — the console's shell: sign-in, the campaign picker, page
// routing by the address's fragment (#campaigns, #models, ...), and the
// error and notice bars every page reports to.
import * as api from './api.js';
import * as campaigns from './campaigns.js';
import * as annotators from './annotators.js';
import * as models from './models.js';
import * as training from './training.js';
import * as tasks from './tasks.js';

const PAGES = { campaigns, annotators, models, training, tasks };
const $ = (id) => document.getElementById(id);

let leaving = []; // clean-ups of the page on screen (timers)
let campaign = null;
let rendering = 0;

export function showError(e) {
  const box = $('error');
  if (!e) { box.hidden = true; box.textContent = ''; return; }
  if (e.status === 401) { signedOut('Your session has ended: sign in again.'); return; }
  box.textContent = e.name && e.name !== 'Error' ? `${e.message} (${e.name})` : String(e.message || e);
  box.hidden = false;
}

export function notice(text) {
  const box = $('notice');
  box.textContent = text || '';
  box.hidden = !text;
}

function signedOut(message) {
  leave();
  api.forget();
  $('nav').hidden = true;
  $('toolbar').hidden = true;
  $('view').replaceChildren();
  $('signin').hidden = false;
  notice('');
  const box = $('error');
  box.textContent = message || '';
  box.hidden = !message;
  $('token').focus();
}

function leave() {
  for (const f of leaving) f();
  leaving = [];
}

async function loadCampaigns() {
  const list = (await api.get('/v1/campaigns')).campaigns;
  const select = $('campaign');
  if (!list.some((c) => c.name === campaign)) campaign = list.length ? list[0].name : null;
  select.replaceChildren(...list.map((c) => {
    const o = document.createElement('option');
    o.value = c.name;
    o.textContent = c.name;
    return o;
  }));
  if (campaign) select.value = campaign;
  return list;
}

// The address's fragment: "#models?campaign=survey" (both parts optional).
function place() {
  const [page, q] = location.hash.replace(/^#/, '').split('?');
  const wanted = new URLSearchParams(q || '').get('campaign');
  return { name: PAGES[page] ? page : 'campaigns', wanted };
}

function address(name) {
  return '#' + name + (campaign ? '?campaign=' + encodeURIComponent(campaign) : '');
}

async function render() {
  leave();
  const { name, wanted } = place();
  if (wanted) campaign = wanted;
  const page = PAGES[name];
  const view = $('view');
  const mine = ++rendering;
  view.setAttribute('aria-busy', 'true');
  showError(null);
  try {
    const list = await loadCampaigns();
    for (const a of document.querySelectorAll('#nav a')) {
      const target = a.dataset.page;
      a.setAttribute('href', address(target));
      if (target === name) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const ctx = {
      campaign, campaigns: list, showError, notice,
      onLeave: (f) => leaving.push(f),
      refresh: () => render(),
      current: () => mine === rendering,
    };
    const el = await page.render(ctx);
    if (mine !== rendering) return;
    view.replaceChildren(el);
    view.dataset.page = name;
  } catch (e) {
    if (mine !== rendering) return;
    view.replaceChildren();
    showError(e);
  } finally {
    if (mine === rendering) view.removeAttribute('aria-busy');
  }
}

function signedIn() {
  $('signin').hidden = true;
  $('nav').hidden = false;
  $('toolbar').hidden = false;
  showError(null);
  render();
}

$('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = $('token');
  const button = ev.target.querySelector('button');
  button.disabled = true;
  try {
    await api.signIn(input.value.trim());
    input.value = '';
    signedIn();
  } catch (e) {
    const box = $('error');
    box.textContent = e.status === 401 ? 'Sign-in failed: check the operator token.' : `${e.message} (${e.name})`;
    box.hidden = false;
  } finally {
    button.disabled = false;
  }
});

$('sign-out').addEventListener('click', async () => {
  try { await api.signOut(); } catch (e) { /* signed out locally either way */ }
  signedOut('Signed out.');
});

$('campaign').addEventListener('change', (ev) => {
  campaign = ev.target.value;
  location.hash = address(place().name); // renders (hashchange)
});

window.addEventListener('hashchange', () => { if ($('signin').hidden) render(); });

(async () => {
  try {
    if (await api.resume()) signedIn();
    else signedOut();
  } catch (e) {
    signedOut();
    showError(e);
  }
})();
