// The keyring on Linux and the BSDs: the Secret Service (the freedesktop.org
// D-Bus API that GNOME Keyring, KWallet and KeePassXC offer) through
// libsecret. See gateway/base/keyring.h.
//
// libsecret's calls block on D-Bus; a service that never answers, or an
// unlock prompt that no one can see (no desktop session), would block them
// for ever. Each operation therefore runs on a thread of its own with a
// GCancellable; the caller waits kTimeout, then cancels and returns an error
// naming the step that did not finish. A thread that does not end even
// after its cancellation is left behind (it owns its state), never waited
// for.
#include "gateway/base/keyring.h"

#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <libsecret/secret.h>
#include <openssl/crypto.h>

namespace h2gate::keyring {
namespace {

const SecretSchema* schema() {
  static const SecretSchema s = {kSecretSchema,
                                 SECRET_SCHEMA_NONE,
                                 {
                                     {"entry", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                     {"username", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                     {nullptr, SECRET_SCHEMA_ATTRIBUTE_STRING},
                                 },
                                 0,
                                 nullptr,
                                 nullptr,
                                 nullptr,
                                 nullptr,
                                 nullptr,
                                 nullptr,
                                 nullptr};
  return &s;
}

constexpr const char* kInstead = "use password_file or ${ENV} instead";

void wipeString(std::string& s) {
  if (s.capacity() > 0) OPENSSL_cleanse(s.data(), s.capacity());
  s.clear();
}

// The step an operation is in, for the message when it does not finish.
enum class Step { Connect, Search, Unlock, Read, Write, Delete };

// One operation's inputs and results, shared by the caller and the thread
// that runs it (which may outlive the caller's wait).
struct Job {
  std::string name, username, password;  // inputs (password: store only)
  GCancellable* cancellable = g_cancellable_new();
  std::atomic<Step> step{Step::Connect};
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Status status = Status::Failed;
  std::string error;
  Entry entry;  // lookup's result

  ~Job() {
    wipeString(password);
    g_object_unref(cancellable);
  }
};

// A GError's message without GDBus's "GDBus.Error:NAME: " prefix; frees it.
std::string take(GError* err) {
  if (err == nullptr) return "unknown error";
  g_dbus_error_strip_remote_error(err);
  std::string text = err->message;
  g_error_free(err);
  return text;
}

// No session bus at all is the usual case on a server, in a service or an
// ssh login: said at once, without asking glib (which would try to
// autolaunch a bus with $DISPLAY).
std::string sessionBusMissing() {
  const char* address = std::getenv("DBUS_SESSION_BUS_ADDRESS");
  if (address != nullptr && *address != '\0') return {};
  // glib's fallback: the bus of the user's systemd session.
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && *runtime) {
    struct stat st {};
    const std::string socket = std::string(runtime) + "/bus";
    if (::stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return {};
  }
  return std::string(
             "no Secret Service: DBUS_SESSION_BUS_ADDRESS is not set (there is no D-Bus "
             "session bus, as in a system service or an ssh login); ") +
         kInstead;
}

// The service, or nullptr with job.error set.
SecretService* connect(Job& job) {
  job.step = Step::Connect;
  GError* err = nullptr;
  SecretService* service =
      secret_service_get_sync(SECRET_SERVICE_OPEN_SESSION, job.cancellable, &err);
  if (service != nullptr) return service;
  const bool unknown = err != nullptr && g_dbus_error_is_remote_error(err) &&
                       std::string_view(g_dbus_error_get_remote_error(err)) ==
                           "org.freedesktop.DBus.Error.ServiceUnknown";
  const bool no_bus =
      err != nullptr && err->domain == G_IO_ERROR && !g_dbus_error_is_remote_error(err);
  const std::string why = take(err);
  if (unknown)
    job.error = "no Secret Service on the D-Bus session bus (" + why +
                "): start one (gnome-keyring-daemon, KWallet) or " + kInstead;
  else if (no_bus)
    job.error =
        "no Secret Service: cannot connect to the D-Bus session bus (" + why + "); " + kInstead;
  else
    job.error = "the Secret Service failed: " + why;
  return nullptr;
}

GHashTable* attributes(const std::string& name) {
  GHashTable* a = g_hash_table_new(g_str_hash, g_str_equal);
  g_hash_table_insert(a, const_cast<char*>("entry"), const_cast<char*>(name.c_str()));
  return a;
}

// Unlocks `objects` (items or collections) through the service's prompt;
// false with job.error when they stay locked.
bool unlock(Job& job, SecretService* service, GList* objects) {
  job.step = Step::Unlock;
  GError* err = nullptr;
  GList* unlocked = nullptr;
  const gint n = secret_service_unlock_sync(service, objects, job.cancellable, &unlocked, &err);
  g_list_free_full(unlocked, g_object_unref);
  if (n > 0 && err == nullptr) return true;
  const std::string why =
      err != nullptr ? take(err) : "no unlock prompt could be shown, or it was dismissed";
  job.error = "the keyring is locked and was not unlocked (" + why +
              "): unlock it in the desktop session (without one: gnome-keyring-daemon --unlock "
              "reads its password on standard input), or " +
              kInstead;
  return false;
}

// The entry's items (none: an empty list), or false with job.error.
bool search(Job& job, SecretService* service, GList** items) {
  job.step = Step::Search;
  GError* err = nullptr;
  GHashTable* attrs = attributes(job.name);
  *items = secret_service_search_sync(service, schema(), attrs, SECRET_SEARCH_ALL, job.cancellable,
                                      &err);
  g_hash_table_unref(attrs);
  if (err == nullptr) return true;
  job.error = "the Secret Service failed to search: " + take(err);
  return false;
}

bool anyLocked(GList* items) {
  for (GList* i = items; i != nullptr; i = i->next)
    if (secret_item_get_locked(SECRET_ITEM(i->data))) return true;
  return false;
}

void runLookup(Job& job) {
  SecretService* service = connect(job);
  if (service == nullptr) return;
  GList* items = nullptr;
  if (search(job, service, &items)) {
    if (items == nullptr) {
      job.status = Status::NotFound;
    } else {
      SecretItem* item = SECRET_ITEM(items->data);
      GList one{item, nullptr, nullptr};
      if (!secret_item_get_locked(item) || unlock(job, service, &one)) {
        job.step = Step::Read;
        GError* err = nullptr;
        if (!secret_item_load_secret_sync(item, job.cancellable, &err)) {
          job.error = "the Secret Service failed to read the password: " + take(err);
        } else if (SecretValue* value = secret_item_get_secret(item); value == nullptr) {
          job.error = "the Secret Service gave no password for the entry";
        } else {
          gsize length = 0;
          const gchar* bytes = secret_value_get(value, &length);
          job.entry.password.assign(bytes, length);
          secret_value_unref(value);
          GHashTable* attrs = secret_item_get_attributes(item);
          if (const auto* user = static_cast<const char*>(g_hash_table_lookup(attrs, "username")))
            job.entry.username = user;
          g_hash_table_unref(attrs);
          job.status = Status::Ok;
        }
      }
    }
    g_list_free_full(items, g_object_unref);
  }
  g_object_unref(service);
}

// Deletes the entry's items (unlocking them first); NotFound when none.
bool deleteItems(Job& job, SecretService* service, bool* found) {
  GList* items = nullptr;
  if (!search(job, service, &items)) return false;
  *found = items != nullptr;
  bool ok = !anyLocked(items) || unlock(job, service, items);
  for (GList* i = items; ok && i != nullptr; i = i->next) {
    job.step = Step::Delete;
    GError* err = nullptr;
    if (!secret_item_delete_sync(SECRET_ITEM(i->data), job.cancellable, &err)) {
      job.error = "the Secret Service failed to delete the entry: " + take(err);
      ok = false;
    }
  }
  g_list_free_full(items, g_object_unref);
  return ok;
}

void runRemove(Job& job) {
  SecretService* service = connect(job);
  if (service == nullptr) return;
  bool found = false;
  if (deleteItems(job, service, &found)) job.status = found ? Status::Ok : Status::NotFound;
  g_object_unref(service);
}

void runStore(Job& job) {
  SecretService* service = connect(job);
  if (service == nullptr) return;
  // The default collection (GNOME Keyring: "login") must be open to write.
  job.step = Step::Search;
  GError* err = nullptr;
  SecretCollection* collection = secret_collection_for_alias_sync(
      service, SECRET_COLLECTION_DEFAULT, SECRET_COLLECTION_NONE, job.cancellable, &err);
  bool ok = true;
  if (collection == nullptr) {
    job.error = err != nullptr ? "the Secret Service failed: " + take(err)
                               : std::string(
                                     "the Secret Service has no default keyring: "
                                     "create one (e.g. with Seahorse), or ") +
                                     kInstead;
    ok = false;
  } else {
    if (secret_collection_get_locked(collection)) {
      GList one{collection, nullptr, nullptr};
      ok = unlock(job, service, &one);
    }
    g_object_unref(collection);
  }
  bool found = false;
  // One item per name: the old one (perhaps another user name) goes first.
  if (ok) ok = deleteItems(job, service, &found);
  if (ok) {
    job.step = Step::Write;
    GHashTable* attrs = attributes(job.name);
    g_hash_table_insert(attrs, const_cast<char*>("username"),
                        const_cast<char*>(job.username.c_str()));
    SecretValue* value = secret_value_new(job.password.data(),
                                          static_cast<gssize>(job.password.size()), "text/plain");
    const std::string label = "h2gate proxy credentials: " + job.name;
    if (secret_service_store_sync(service, schema(), attrs, SECRET_COLLECTION_DEFAULT,
                                  label.c_str(), value, job.cancellable, &err))
      job.status = Status::Ok;
    else
      job.error = "the Secret Service failed to store the entry: " + take(err);
    secret_value_unref(value);
    g_hash_table_unref(attrs);
  }
  g_object_unref(service);
}

std::string timeoutMessage(Step step) {
  const std::string limit = std::to_string(kTimeout.count()) + " s";
  switch (step) {
    case Step::Connect:
      return "the Secret Service (org.freedesktop.secrets on the D-Bus session bus) did not "
             "answer within " +
             limit + ": is its keyring daemon (gnome-keyring-daemon, KWallet) hung? " + kInstead;
    case Step::Unlock:
      return "the keyring is locked and was not unlocked within " + limit +
             " (its unlock prompt needs a desktop session): unlock it in the desktop session "
             "(without one: gnome-keyring-daemon --unlock reads its password on standard "
             "input), or " +
             kInstead;
    default:
      return "the Secret Service did not answer within " + limit + "; " + kInstead;
  }
}

// Runs `op` on a thread of its own, bounded by kTimeout (above).
Status bounded(const std::shared_ptr<Job>& job, void (*op)(Job&), std::string* error) {
  if (std::string why = sessionBusMissing(); !why.empty()) {
    *error = why;
    return Status::Failed;
  }
  std::thread([job, op] {
    op(*job);
    std::lock_guard lock(job->m);
    job->done = true;
    job->cv.notify_all();
  }).detach();
  std::unique_lock lock(job->m);
  if (!job->cv.wait_for(lock, kTimeout, [&] { return job->done; })) {
    const Step step = job->step;
    g_cancellable_cancel(job->cancellable);
    // Cancelled, libsecret's calls return at once; the wait only lets the
    // thread finish before the process goes on.
    job->cv.wait_for(lock, std::chrono::seconds(1), [&] { return job->done; });
    *error = timeoutMessage(step);
    return Status::Failed;
  }
  if (job->status == Status::Failed) *error = job->error;
  return job->status;
}

std::shared_ptr<Job> newJob(const std::string& name) {
  auto job = std::make_shared<Job>();
  job->name = name;
  return job;
}

}  // namespace

std::string_view backendName() {
  return "the Secret Service";
}

Status store(const std::string& name, const std::string& username, const std::string& password,
             std::string* error) {
  auto job = newJob(name);
  job->username = username;
  job->password = password;
  return bounded(job, runStore, error);
}

Status remove(const std::string& name, std::string* error) {
  return bounded(newJob(name), runRemove, error);
}

namespace detail {

Status lookupEntry(const std::string& name, Entry* out, std::string* error) {
  auto job = newJob(name);
  const Status s = bounded(job, runLookup, error);
  if (s == Status::Ok) {
    std::lock_guard lock(job->m);
    out->username = job->entry.username;
    out->password = job->entry.password;
    job->entry.clear();
  }
  return s;
}

}  // namespace detail
}  // namespace h2gate::keyring
