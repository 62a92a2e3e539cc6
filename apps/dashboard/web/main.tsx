import { render } from 'preact';
import { Api } from './lib/api.js';
import { ServicesContext } from './lib/context.js';
import { EventStream } from './lib/events.js';
import './styles.css';
import { App } from './views/app.js';

const api = new Api(sessionStorage);
const stream = new EventStream(api);
stream.start();

const root = document.getElementById('app');
if (root === null) throw new Error('index.html has no #app element');
root.textContent = '';
render(
  <ServicesContext.Provider value={{ api, stream }}>
    <App />
  </ServicesContext.Provider>,
  root,
);
