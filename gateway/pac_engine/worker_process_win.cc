// PAC worker processes on Windows (gateway/pac_engine/worker_process.h): this
// module's own executable again by CreateProcessW, two anonymous pipes as
// its stdin and stdout. Only those handles (and a copy of stderr) are
// inherited (PROC_THREAD_ATTRIBUTE_HANDLE_LIST), so no socket of h2gate's
// reaches it. Every worker joins one job object that kills its processes
// when h2gate's handle to it closes: a worker stuck in a native function
// never outlives an h2gate that died.
#include <windows.h>

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cwctype>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/pac_engine/worker_process.h"

namespace h2gate::pac {

struct WorkerProcess::Impl {
  HANDLE process = nullptr;
  HANDLE to_worker = nullptr;    // its stdin, our end
  HANDLE from_worker = nullptr;  // its stdout, our end
  DWORD pid = 0;
  std::mutex mutex;  // to_worker against stop()
};

namespace {

std::string errorText(const char* what, DWORD err) {
  return std::string(what) + " failed with error " + std::to_string(err);
}

// The job every worker joins; its only handle is h2gate's, closed by the
// system when h2gate exits however it exits.
HANDLE workerJob() {
  static const HANDLE job = [] {
    HANDLE j = CreateJobObjectW(nullptr, nullptr);
    if (j != nullptr) {
      JOBOBJECT_EXTENDED_LIMIT_INFORMATION info{};
      info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
      SetInformationJobObject(j, JobObjectExtendedLimitInformation, &info, sizeof info);
    }
    return j;
  }();
  return job;
}

std::wstring ownPath() {
  std::wstring path(MAX_PATH, L'\0');
  while (true) {
    const DWORD n = GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size()));
    if (n == 0) return L"";
    if (n < path.size()) {
      path.resize(n);
      return path;
    }
    path.resize(path.size() * 2);
  }
}

// The worker's environment block: what the C runtime and the system need
// (SystemRoot, windir, SystemDrive, PATH, TEMP, TMP) and TZ, nothing else.
// It runs JavaScript from the network: h2gate's own variables
// (H2GATE_UPSTREAM with a password, proxy variables with credentials) are
// none of its business.
std::wstring workerEnvironment() {
  static const wchar_t* const kKept[] = {L"SYSTEMROOT", L"WINDIR", L"SYSTEMDRIVE", L"PATH",
                                         L"TEMP",       L"TMP",    L"TZ"};
  std::wstring block;
  wchar_t* all = GetEnvironmentStringsW();
  for (const wchar_t* e = all; e != nullptr && *e != L'\0'; e += wcslen(e) + 1) {
    const std::wstring_view var(e);
    const std::size_t eq = var.find(L'=', 1);  // "=C:=C:\\" entries start with '='
    if (eq == std::wstring_view::npos) continue;
    std::wstring name(var.substr(0, eq));
    for (wchar_t& c : name) c = static_cast<wchar_t>(towupper(c));
    for (const wchar_t* kept : kKept)
      if (name == kept) {
        block.append(var);
        block.push_back(L'\0');
        break;
      }
  }
  if (all != nullptr) FreeEnvironmentStringsW(all);
  // The block ends with an empty string; an empty block is two NULs.
  if (block.empty()) block.push_back(L'\0');
  block.push_back(L'\0');
  return block;
}

// Spawns one at a time: inheritable handles of two workers started at once
// must not cross (the handle list guards CreateProcessW; this, the window
// in which both pairs are inheritable).
std::mutex g_spawn_mutex;

void closeIf(HANDLE& h) {
  if (h != nullptr && h != INVALID_HANDLE_VALUE) CloseHandle(h);
  h = nullptr;
}

// Blocking, all of it; false when the other end is gone.
bool writeAll(HANDLE h, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(size, 1u << 20));
    DWORD written = 0;
    if (!WriteFile(h, p, chunk, &written, nullptr)) return false;
    p += written;
    size -= written;
  }
  return true;
}

// Blocking, some bytes; 0 when the other end is gone.
std::size_t readSome(HANDLE h, void* data, std::size_t size) {
  DWORD got = 0;
  const DWORD want = static_cast<DWORD>(std::min<std::size_t>(size, 1u << 20));
  if (!ReadFile(h, data, want, &got, nullptr)) return 0;
  return got;
}

}  // namespace

std::unique_ptr<WorkerProcess> WorkerProcess::start(const std::string& label, std::string* error) {
  const std::wstring exe = ownPath();
  if (exe.empty()) {
    *error = errorText("GetModuleFileNameW", GetLastError());
    return nullptr;
  }
  std::lock_guard spawn_lock(g_spawn_mutex);
  SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  HANDLE in_read = nullptr, in_write = nullptr, out_read = nullptr, out_write = nullptr,
         err_copy = nullptr;
  auto fail = [&](const char* what) {
    *error = errorText(what, GetLastError());
    closeIf(in_read);
    closeIf(in_write);
    closeIf(out_read);
    closeIf(out_write);
    closeIf(err_copy);
    return nullptr;
  };
  if (!CreatePipe(&in_read, &in_write, &inherit, 0)) return fail("CreatePipe");
  if (!CreatePipe(&out_read, &out_write, &inherit, 0)) return fail("CreatePipe");
  SetHandleInformation(in_write, HANDLE_FLAG_INHERIT, 0);
  SetHandleInformation(out_read, HANDLE_FLAG_INHERIT, 0);
  // Its stderr: a copy of ours (the worker writes nothing there itself; a C
  // runtime message may), else NUL.
  const HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
  if (err == nullptr || err == INVALID_HANDLE_VALUE ||
      !DuplicateHandle(GetCurrentProcess(), err, GetCurrentProcess(), &err_copy, 0, TRUE,
                       DUPLICATE_SAME_ACCESS)) {
    err_copy = CreateFileW(L"NUL", GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                           OPEN_EXISTING, 0, nullptr);
    if (err_copy == INVALID_HANDLE_VALUE) {
      err_copy = nullptr;
      return fail("CreateFileW(NUL)");
    }
  }

  SIZE_T size = 0;
  InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
  std::vector<char> storage(size);
  auto* attributes = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(storage.data());
  if (!InitializeProcThreadAttributeList(attributes, 1, 0, &size))
    return fail("InitializeProcThreadAttributeList");
  HANDLE handles[] = {in_read, out_write, err_copy};
  if (!UpdateProcThreadAttribute(attributes, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles,
                                 sizeof handles, nullptr, nullptr)) {
    DeleteProcThreadAttributeList(attributes);
    return fail("UpdateProcThreadAttribute");
  }
  STARTUPINFOEXW si{};
  si.StartupInfo.cb = sizeof si;
  si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  si.StartupInfo.hStdInput = in_read;
  si.StartupInfo.hStdOutput = out_write;
  si.StartupInfo.hStdError = err_copy;
  si.lpAttributeList = attributes;
  // The label is plain ASCII without quotes (gateway/pac_engine/worker.cc).
  std::wstring command = L"\"" + exe + L"\" ";
  for (char c : kWorkerFlag) command += static_cast<wchar_t>(c);
  command += L" ";
  for (char c : label) command += static_cast<wchar_t>(c);
  std::wstring environment = workerEnvironment();
  PROCESS_INFORMATION pi{};
  // Suspended until it is in the job. No console at all (DETACHED_PROCESS):
  // not h2gate's, so Ctrl+C in h2gate's console is h2gate's to handle, and
  // not one of its own, which CREATE_NO_WINDOW would give it: a hidden
  // conhost.exe per worker, and under wine 8 one that may outlive a worker
  // killed early, keeping the wine session and the pipes of whoever started
  // h2gate.exe open (tests/unit/pac_engine/worker_process_win_test.cc).
  const BOOL created = CreateProcessW(exe.c_str(), command.data(), nullptr, nullptr, TRUE,
                                      EXTENDED_STARTUPINFO_PRESENT | CREATE_SUSPENDED |
                                          DETACHED_PROCESS | CREATE_UNICODE_ENVIRONMENT,
                                      environment.data(), nullptr, &si.StartupInfo, &pi);
  const DWORD create_error = GetLastError();
  DeleteProcThreadAttributeList(attributes);
  if (!created) {
    SetLastError(create_error);
    return fail("CreateProcessW");
  }
  // Without the job (an h2gate itself in a job that forbids it), a worker
  // still ends when its stdin closes, unless stuck in a native function.
  if (HANDLE job = workerJob(); job != nullptr) AssignProcessToJobObject(job, pi.hProcess);
  ResumeThread(pi.hThread);
  CloseHandle(pi.hThread);
  closeIf(in_read);
  closeIf(out_write);
  closeIf(err_copy);
  auto impl = std::make_unique<Impl>();
  impl->process = pi.hProcess;
  impl->pid = pi.dwProcessId;
  impl->to_worker = in_write;
  impl->from_worker = out_read;
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(std::move(impl)));
}

WorkerProcess::WorkerProcess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerProcess::~WorkerProcess() {
  closeIf(impl_->to_worker);
  closeIf(impl_->from_worker);
  if (WaitForSingleObject(impl_->process, 0) != WAIT_OBJECT_0) {
    TerminateProcess(impl_->process, 1);
    WaitForSingleObject(impl_->process, 5000);
  }
  CloseHandle(impl_->process);
}

bool WorkerProcess::write(const void* data, std::size_t size) {
  HANDLE h;
  {
    std::lock_guard lock(impl_->mutex);
    h = impl_->to_worker;
  }
  return h != nullptr && writeAll(h, data, size);
}

std::size_t WorkerProcess::read(void* data, std::size_t size) {
  return readSome(impl_->from_worker, data, size);
}

void WorkerProcess::kill() {
  // The process handle stays valid until the destructor: no other process
  // can be hit, whatever happened meanwhile.
  TerminateProcess(impl_->process, 1);
}

void WorkerProcess::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(impl_->mutex);
    closeIf(impl_->to_worker);  // an idle worker reads the end and exits 0
  }
  if (WaitForSingleObject(impl_->process, static_cast<DWORD>(grace.count())) != WAIT_OBJECT_0) {
    TerminateProcess(impl_->process, 1);
    WaitForSingleObject(impl_->process, 5000);
  }
}

std::string WorkerProcess::howItEnded() {
  if (WaitForSingleObject(impl_->process, 200) != WAIT_OBJECT_0) return "";
  DWORD code = 0;
  if (!GetExitCodeProcess(impl_->process, &code)) return "ended";
  char hex[16];
  snprintf(hex, sizeof hex, "0x%08lx", static_cast<unsigned long>(code));
  return "exited with status " + std::to_string(code) +
         (code > 255 ? std::string(" (") + hex + ")" : "");
}

long WorkerProcess::pid() const {
  return static_cast<long>(impl_->pid);
}

namespace worker_channel {

void prepare() {
  // No "program has stopped working" dialog for a worker that crashed.
  SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX);
}

std::size_t read(void* data, std::size_t size) {
  return readSome(GetStdHandle(STD_INPUT_HANDLE), data, size);
}

bool write(const void* data, std::size_t size) {
  return writeAll(GetStdHandle(STD_OUTPUT_HANDLE), data, size);
}

void releaseMemory() {
  _heapmin();
}

}  // namespace worker_channel
}  // namespace h2gate::pac
