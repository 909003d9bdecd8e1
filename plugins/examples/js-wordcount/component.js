// The component's entry (what componentize-js builds): the host's imports, handed to the plugin in app.js.
import * as host from "toolwright:plugin/host@0.2.0";
import { plugin } from "./app.js";

export const tool = plugin.exports({ host });
