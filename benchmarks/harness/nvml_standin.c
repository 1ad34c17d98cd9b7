/* A stand-in libnvidia-ml.so.1 for the tests and the agent benchmark (no GPU here).
 *
 * It implements, at NVML's ABI as nvml.h declares it, the entry points the agent calls through
 * nvidia-ml-py: nvmlInitWithFlags, nvmlInit_v2, nvmlShutdown, nvmlErrorString,
 * nvmlSystemGetDriverVersion, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlDeviceGetName, nvmlDeviceGetUUID, nvmlDeviceGetIndex, nvmlDeviceGetTotalEnergyConsumption,
 * nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetMigMode,
 * nvmlDeviceGetVirtualizationMode, nvmlDeviceGetProcessUtilization.
 *
 * Everything it answers comes from a state file named by $KUBEJOULE_NVML_STATE, re-read when the
 * file changes (benchmarks/harness/nvml_standin.py writes it atomically). One `key=value` per line:
 *
 *   init_rc=9                        nvmlInitWithFlags' return code (9: driver not loaded)
 *   driver=550.54.15
 *   count=2
 *   gpu.0.name=NVIDIA H100 80GB HBM3
 *   gpu.0.uuid=GPU-…
 *   gpu.0.energy_mj=123456           nvmlDeviceGetTotalEnergyConsumption (unsigned long long)
 *   gpu.0.energy_rate_mw=250000      and it grows at this rate from the file's time on (a GPU at work)
 *   gpu.0.power_mw=250000            nvmlDeviceGetPowerUsage
 *   gpu.0.limit_mw=700000            nvmlDeviceGetEnforcedPowerLimit
 *   gpu.0.mig=1                      current MIG mode
 *   gpu.0.virt=2                     nvmlGpuVirtualizationMode_t
 *   gpu.0.rc.energy=3                a function's return code (energy, power, limit, mig, virt,
 *   gpu.0.rc.all=15                  util, name, uuid; `all` for every call on the device)
 *   gpu.0.proc=4242,37,10,1700000000000000   pid, smUtil, memUtil, timeStamp (µs); repeatable; a
 *                                    timeStamp of 0 is "now" at every call (a process always at work)
 *
 * Build: gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 nvml_standin.c
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef int nvmlReturn_t; /* enum nvmlReturn_enum: an int at the C ABI */
enum {
    NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_GPU_IS_LOST = 15, NVML_ERROR_UNKNOWN = 999
};

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

#define MAX_GPUS 64
#define MAX_PROCS 256
#define TEXT 96

enum { RC_ENERGY, RC_POWER, RC_LIMIT, RC_MIG, RC_VIRT, RC_UTIL, RC_NAME, RC_UUID, RC_ALL, RC_COUNT };
static const char *rc_names[RC_COUNT] = {"energy", "power", "limit", "mig", "virt", "util", "name", "uuid", "all"};

struct nvmlDevice_st {
    unsigned int index;
    char name[TEXT];
    char uuid[TEXT];
    unsigned long long energy_mj;
    unsigned long long energy_rate_mw;
    unsigned int power_mw;
    unsigned int limit_mw;
    unsigned int mig;
    int virt;
    int rc[RC_COUNT];
    unsigned int nprocs;
    nvmlProcessUtilizationSample_t procs[MAX_PROCS];
};

static struct nvmlDevice_st devices[MAX_GPUS];
static unsigned int device_count;
static int init_rc;
static char driver[TEXT] = "550.54.15";
static int initialized;
static struct timespec loaded_mtime;
static ino_t loaded_inode;

static void reset_state(void) {
    memset(devices, 0, sizeof devices);
    device_count = 0;
    init_rc = NVML_SUCCESS;
    strcpy(driver, "550.54.15");
    for (unsigned int i = 0; i < MAX_GPUS; i++) {
        devices[i].index = i;
        snprintf(devices[i].name, TEXT, "Stand-in GPU");
        snprintf(devices[i].uuid, TEXT, "GPU-00000000-0000-0000-0000-%012u", i);
    }
}

static void copy_text(char *to, const char *from) {
    snprintf(to, TEXT, "%s", from);
}

static void apply(const char *key, const char *value) {
    unsigned int index;
    int used = 0;
    if (strcmp(key, "count") == 0) {
        device_count = (unsigned int)strtoul(value, NULL, 10);
        if (device_count > MAX_GPUS) device_count = MAX_GPUS;
    } else if (strcmp(key, "init_rc") == 0) {
        init_rc = atoi(value);
    } else if (strcmp(key, "driver") == 0) {
        copy_text(driver, value);
    } else if (sscanf(key, "gpu.%u.%n", &index, &used) == 1 && used > 0 && index < MAX_GPUS) {
        struct nvmlDevice_st *d = &devices[index];
        const char *field = key + used;
        if (strcmp(field, "name") == 0) copy_text(d->name, value);
        else if (strcmp(field, "uuid") == 0) copy_text(d->uuid, value);
        else if (strcmp(field, "energy_mj") == 0) d->energy_mj = strtoull(value, NULL, 10);
        else if (strcmp(field, "energy_rate_mw") == 0) d->energy_rate_mw = strtoull(value, NULL, 10);
        else if (strcmp(field, "power_mw") == 0) d->power_mw = (unsigned int)strtoul(value, NULL, 10);
        else if (strcmp(field, "limit_mw") == 0) d->limit_mw = (unsigned int)strtoul(value, NULL, 10);
        else if (strcmp(field, "mig") == 0) d->mig = (unsigned int)strtoul(value, NULL, 10);
        else if (strcmp(field, "virt") == 0) d->virt = atoi(value);
        else if (strncmp(field, "rc.", 3) == 0) {
            for (int r = 0; r < RC_COUNT; r++)
                if (strcmp(field + 3, rc_names[r]) == 0) d->rc[r] = atoi(value);
        } else if (strcmp(field, "proc") == 0 && d->nprocs < MAX_PROCS) {
            nvmlProcessUtilizationSample_t *p = &d->procs[d->nprocs];
            memset(p, 0, sizeof *p);
            if (sscanf(value, "%u,%u,%u,%llu", &p->pid, &p->smUtil, &p->memUtil, &p->timeStamp) == 4)
                d->nprocs++;
        }
    }
}

/* Re-read the state file when it changed since the last read (a new inode or mtime). */
static void load(void) {
    const char *path = getenv("KUBEJOULE_NVML_STATE");
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) return;
    if (st.st_ino == loaded_inode && st.st_mtim.tv_sec == loaded_mtime.tv_sec &&
        st.st_mtim.tv_nsec == loaded_mtime.tv_nsec)
        return;
    FILE *file = fopen(path, "r");
    if (file == NULL) return;
    reset_state();
    char line[512];
    while (fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        char *equals = strchr(line, '=');
        if (equals == NULL) continue;
        *equals = '\0';
        apply(line, equals + 1);
    }
    fclose(file);
    loaded_inode = st.st_ino;
    loaded_mtime = st.st_mtim;
}

/* The return code of a call on a device, or NVML_SUCCESS when it may answer (which < 0: a call
 * only `rc.all` can fail). */
static nvmlReturn_t device_rc(struct nvmlDevice_st *d, int which) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    load();
    if (d == NULL || d < devices || d >= devices + device_count) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->rc[RC_ALL] != 0) return d->rc[RC_ALL];
    return which < 0 ? NVML_SUCCESS : d->rc[which];
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    loaded_inode = 0;
    load();
    if (init_rc != NVML_SUCCESS) return init_rc;
    initialized++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    initialized--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    load();
    if (strlen(driver) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(version, driver);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    load();
    *count = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct nvmlDevice_st **device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    load();
    if (device == NULL || index >= device_count) return NVML_ERROR_INVALID_ARGUMENT;
    if (devices[index].rc[RC_ALL] != 0) return devices[index].rc[RC_ALL];
    *device = &devices[index];
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_out(const char *text, char *out, unsigned int length) {
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, text);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(struct nvmlDevice_st *device, char *name, unsigned int length) {
    nvmlReturn_t rc = device_rc(device, RC_NAME);
    return rc != NVML_SUCCESS ? rc : copy_out(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(struct nvmlDevice_st *device, char *uuid, unsigned int length) {
    nvmlReturn_t rc = device_rc(device, RC_UUID);
    return rc != NVML_SUCCESS ? rc : copy_out(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetIndex(struct nvmlDevice_st *device, unsigned int *index) {
    nvmlReturn_t rc = device_rc(device, -1);
    if (rc != NVML_SUCCESS) return rc;
    if (index == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *index = device->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(struct nvmlDevice_st *device, unsigned long long *energy) {
    nvmlReturn_t rc = device_rc(device, RC_ENERGY);
    if (rc != NVML_SUCCESS) return rc;
    if (energy == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double seconds = (double)(now.tv_sec - loaded_mtime.tv_sec) + (now.tv_nsec - loaded_mtime.tv_nsec) / 1e9;
    *energy = device->energy_mj + (unsigned long long)(device->energy_rate_mw * (seconds > 0 ? seconds : 0));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(struct nvmlDevice_st *device, unsigned int *power) {
    nvmlReturn_t rc = device_rc(device, RC_POWER);
    if (rc != NVML_SUCCESS) return rc;
    if (power == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *power = device->power_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(struct nvmlDevice_st *device, unsigned int *limit) {
    nvmlReturn_t rc = device_rc(device, RC_LIMIT);
    if (rc != NVML_SUCCESS) return rc;
    if (limit == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = device->limit_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(struct nvmlDevice_st *device, unsigned int *current, unsigned int *pending) {
    nvmlReturn_t rc = device_rc(device, RC_MIG);
    if (rc != NVML_SUCCESS) return rc;
    if (current == NULL || pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = device->mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetVirtualizationMode(struct nvmlDevice_st *device, int *mode) {
    nvmlReturn_t rc = device_rc(device, RC_VIRT);
    if (rc != NVML_SUCCESS) return rc;
    if (mode == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = device->virt;
    return NVML_SUCCESS;
}

/* As nvml.h documents it: with a NULL buffer, the count needed and INSUFFICIENT_SIZE; samples
 * newer than lastSeenTimeStamp only; NOT_FOUND when there are none. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(struct nvmlDevice_st *device, nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long lastSeenTimeStamp) {
    nvmlReturn_t rc = device_rc(device, RC_UTIL);
    if (rc != NVML_SUCCESS) return rc;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig) return NVML_ERROR_NOT_SUPPORTED; /* "On MIG-enabled GPUs ... not currently supported" */
    struct timespec clock_now;
    clock_gettime(CLOCK_REALTIME, &clock_now);
    unsigned long long now_us = (unsigned long long)clock_now.tv_sec * 1000000ULL + clock_now.tv_nsec / 1000;
    unsigned int fresh = 0;
    for (unsigned int i = 0; i < device->nprocs; i++) {
        unsigned long long stamp = device->procs[i].timeStamp ? device->procs[i].timeStamp : now_us;
        if (stamp > lastSeenTimeStamp) fresh++;
    }
    if (fresh == 0) {
        *count = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    if (utilization == NULL || *count < fresh) {
        *count = fresh;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int written = 0;
    for (unsigned int i = 0; i < device->nprocs; i++) {
        unsigned long long stamp = device->procs[i].timeStamp ? device->procs[i].timeStamp : now_us;
        if (stamp > lastSeenTimeStamp) {
            utilization[written] = device->procs[i];
            utilization[written++].timeStamp = stamp;
        }
    }
    *count = written;
    return NVML_SUCCESS;
}
