// Every page of the console, registered by importing its module. A new page is one module
// that calls definePage() (and addNavItem() to be in the bar), added to this list.
import "./sign-in.js";
import "./sessions.js";
import "./new-session.js";
import "./session.js";
import "./folders.js";
import "./folder.js";
import "./endpoints.js";
import "./quota.js";
import "./op-cluster.js";
import "./op-queue.js";
import "./op-usage.js";
import "./op-events.js";
import "./op-log.js";
import "./op-people.js";
import "./op-images.js";
