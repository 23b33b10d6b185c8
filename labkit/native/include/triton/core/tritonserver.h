/*
 * labkit's own declarations of the Triton Inference Server C API as shipped in release 23.12
 * (server 2.41.0, TRITONSERVER API 1.27): every function of 23.12's tritonserver.h, with the same
 * types, and every enum with the same values. Names, signatures and values only; the comments are
 * labkit's. This file holds what backends call most (data types, errors, logging, messages, buffer
 * attributes, custom metrics); the rest is in files it includes at the end, one subject each: the
 * in-process inference API (C++ BLS: labkit_inference_request.h), traces and server-wide metrics
 * (labkit_server_traces.h), creating and controlling a server (labkit_server_embedding.h).
 * tests/test_header_abi.py compares all of it with Triton's own r23.12 header and with the symbols
 * the 23.12 server library exports.
 *
 * The file name and include path match Triton's own header, so a build switches to the official
 * r23.12 headers (e.g. /opt/tritonserver/include in the NGC image) by changing the -I folder only.
 *
 * Nothing here is defined by a backend: the running tritonserver process provides every
 * function. Backends are therefore built without -ltritonserver and the symbols stay undefined
 * until Triton dlopens the library.
 */
#ifndef LABKIT_TRITON_CORE_TRITONSERVER_H
#define LABKIT_TRITON_CORE_TRITONSERVER_H
/* Triton's own tritonserver.h came first (a backend mixing labkit's helpers with Triton's utilities, or
 * an include path that puts Triton's folder first): it declares all of this already, and a second set
 * of the same enums would not compile. Triton's has no guard to test, only this macro. */
#ifndef TRITONSERVER_API_VERSION_MAJOR

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks functions the server exports. On an undefined declaration it changes nothing for GCC;
 * it is kept so code written against the official header's macro names compiles unchanged. */
#ifndef TRITONSERVER_DECLSPEC
#define TRITONSERVER_DECLSPEC __attribute__((visibility("default")))
#endif

#define TRITONSERVER_API_VERSION_MAJOR 1
#define TRITONSERVER_API_VERSION_MINOR 27

/* Opaque objects: only the server knows their layout. */
struct TRITONSERVER_BufferAttributes;
struct TRITONSERVER_Error;
struct TRITONSERVER_InferenceRequest;
struct TRITONSERVER_InferenceResponse;
struct TRITONSERVER_InferenceTrace;
struct TRITONSERVER_Message;
struct TRITONSERVER_Metric;
struct TRITONSERVER_MetricFamily;
struct TRITONSERVER_Metrics;
struct TRITONSERVER_Parameter;
struct TRITONSERVER_ResponseAllocator;
struct TRITONSERVER_Server;
struct TRITONSERVER_ServerOptions;

/* Typedefs so the header also reads as C; C++ would not need them. */
typedef struct TRITONSERVER_BufferAttributes TRITONSERVER_BufferAttributes;
typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_InferenceRequest TRITONSERVER_InferenceRequest;
typedef struct TRITONSERVER_InferenceResponse TRITONSERVER_InferenceResponse;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONSERVER_Metric TRITONSERVER_Metric;
typedef struct TRITONSERVER_MetricFamily TRITONSERVER_MetricFamily;
typedef struct TRITONSERVER_Metrics TRITONSERVER_Metrics;
typedef struct TRITONSERVER_Parameter TRITONSERVER_Parameter;
typedef struct TRITONSERVER_ResponseAllocator TRITONSERVER_ResponseAllocator;
typedef struct TRITONSERVER_Server TRITONSERVER_Server;
typedef struct TRITONSERVER_ServerOptions TRITONSERVER_ServerOptions;

/* The server API version of the running Triton (1.27 for 23.12). */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ApiVersion(uint32_t* major, uint32_t* minor);

/* ---- tensor data types ------------------------------------------------------------------------ */

typedef enum TRITONSERVER_datatype_enum {
  TRITONSERVER_TYPE_INVALID = 0,
  TRITONSERVER_TYPE_BOOL = 1,
  TRITONSERVER_TYPE_UINT8 = 2,
  TRITONSERVER_TYPE_UINT16 = 3,
  TRITONSERVER_TYPE_UINT32 = 4,
  TRITONSERVER_TYPE_UINT64 = 5,
  TRITONSERVER_TYPE_INT8 = 6,
  TRITONSERVER_TYPE_INT16 = 7,
  TRITONSERVER_TYPE_INT32 = 8,
  TRITONSERVER_TYPE_INT64 = 9,
  TRITONSERVER_TYPE_FP16 = 10,
  TRITONSERVER_TYPE_FP32 = 11,
  TRITONSERVER_TYPE_FP64 = 12,
  TRITONSERVER_TYPE_BYTES = 13,
  TRITONSERVER_TYPE_BF16 = 14
} TRITONSERVER_DataType;

/* Protocol names such as "FP32"; an unknown value gives "<invalid>". The string is static. */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype);
/* The reverse. Takes protocol names ("FP32"), not config names ("TYPE_FP32"): those give INVALID. */
TRITONSERVER_DECLSPEC TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char* dtype);
/* Bytes per element. 0 for BYTES (each element carries its own length) and for INVALID. */
TRITONSERVER_DECLSPEC uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype);

/* ---- memory ------------------------------------------------------------------------------------- */

typedef enum TRITONSERVER_memorytype_enum {
  TRITONSERVER_MEMORY_CPU = 0,
  TRITONSERVER_MEMORY_CPU_PINNED = 1,
  TRITONSERVER_MEMORY_GPU = 2
} TRITONSERVER_MemoryType;

/* "CPU", "CPU_PINNED", "GPU". */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype);

/* ---- parameters (metric labels, request parameters) --------------------------------------------- */

/* 23.12 has four kinds. Later releases insert DOUBLE before BYTES, which moves BYTES to 4: a
 * header from a newer release gives the wrong value here. */
typedef enum TRITONSERVER_parametertype_enum {
  TRITONSERVER_PARAMETER_STRING = 0,
  TRITONSERVER_PARAMETER_INT = 1,
  TRITONSERVER_PARAMETER_BOOL = 2,
  TRITONSERVER_PARAMETER_BYTES = 3
} TRITONSERVER_ParameterType;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype);
/* A named value; value points at a C string (STRING), int64_t (INT) or bool (BOOL) and is copied.
 * Returns NULL for BYTES: use ParameterBytesNew. Free with ParameterDelete. */
TRITONSERVER_DECLSPEC TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(
    const char* name, const TRITONSERVER_ParameterType type, const void* value);
/* Keeps only the pointer: the bytes must outlive the parameter. */
TRITONSERVER_DECLSPEC TRITONSERVER_Parameter* TRITONSERVER_ParameterBytesNew(
    const char* name, const void* byte_ptr, const uint64_t size);
TRITONSERVER_DECLSPEC void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter);

/* ---- instance groups ------------------------------------------------------------------------------ */

typedef enum TRITONSERVER_instancegroupkind_enum {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO = 0,
  TRITONSERVER_INSTANCEGROUPKIND_CPU = 1,
  TRITONSERVER_INSTANCEGROUPKIND_GPU = 2,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL = 3
} TRITONSERVER_InstanceGroupKind;

/* "AUTO", "CPU", "GPU", "MODEL" (the config spells them KIND_CPU and so on). */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_InstanceGroupKindString(TRITONSERVER_InstanceGroupKind kind);

/* ---- logging --------------------------------------------------------------------------------------- */

typedef enum TRITONSERVER_loglevel_enum {
  TRITONSERVER_LOG_INFO = 0,
  TRITONSERVER_LOG_WARN = 1,
  TRITONSERVER_LOG_ERROR = 2,
  TRITONSERVER_LOG_VERBOSE = 3
} TRITONSERVER_LogLevel;

/* How log lines start: DEFAULT is glog's "I1125 13:40:00.123 ..." prefix, ISO8601 a full date. */
typedef enum TRITONSERVER_logformat_enum {
  TRITONSERVER_LOG_DEFAULT = 0,
  TRITONSERVER_LOG_ISO8601 = 1
} TRITONSERVER_LogFormat;

/* Cheap test before building an expensive message (VERBOSE is off unless --log-verbose). */
TRITONSERVER_DECLSPEC bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level);
/* One line in the server's log, prefixed with level, time, thread and filename:line. The server
 * prints the file's base name only. Does nothing when the level is disabled. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel level, const char* filename, const int line, const char* msg);

/* ---- errors ---------------------------------------------------------------------------------------- */

/* A NULL TRITONSERVER_Error* means success everywhere in this API. */
typedef enum TRITONSERVER_errorcode_enum {
  TRITONSERVER_ERROR_UNKNOWN = 0,
  TRITONSERVER_ERROR_INTERNAL = 1,
  TRITONSERVER_ERROR_NOT_FOUND = 2,
  TRITONSERVER_ERROR_INVALID_ARG = 3,
  TRITONSERVER_ERROR_UNAVAILABLE = 4,
  TRITONSERVER_ERROR_UNSUPPORTED = 5,
  TRITONSERVER_ERROR_ALREADY_EXISTS = 6,
  /* Round-trips through ErrorNew/ErrorCode, but 2.41's ErrorCodeString names it "<invalid code>". */
  TRITONSERVER_ERROR_CANCELLED = 7
} TRITONSERVER_Error_Code;

/* The caller owns the new error (msg is copied) until it returns it from an entry point or deletes
 * it. TRITONBACKEND_ResponseSend copies an error's code and message: the caller still deletes it. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg);
TRITONSERVER_DECLSPEC void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
TRITONSERVER_DECLSPEC TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error);
/* "Invalid argument" and so on. Like ErrorMessage, the text lives as long as the error. */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_ErrorCodeString(TRITONSERVER_Error* error);
TRITONSERVER_DECLSPEC const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error);

/* ---- messages: JSON documents passed across the API (model config, backend config) --------------- */

/* Parses and copies the JSON text; the caller owns the message. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(
    TRITONSERVER_Message** message, const char* base, size_t byte_size);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message);
/* *base points into the message (valid until it is deleted) and is not NUL-terminated. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size);

/* ---- request and response flags ---------------------------------------------------------------------- */

/* Bits of TRITONBACKEND_RequestFlags, set by the sequence batcher. */
typedef enum tritonserver_requestflag_enum {
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1,
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
} TRITONSERVER_RequestFlag;

/* For TRITONBACKEND_RequestRelease: ALL gives the whole request back; RESCHEDULE (with ALL) asks
 * Triton to queue it again for another execution (models with iterative scheduling only). */
typedef enum tritonserver_requestreleaseflag_enum {
  TRITONSERVER_REQUEST_RELEASE_ALL = 1,
  TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
} TRITONSERVER_RequestReleaseFlag;

/* For TRITONBACKEND_ResponseSend: no more responses follow for this request. */
typedef enum tritonserver_responsecompleteflag_enum {
  TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
} TRITONSERVER_ResponseCompleteFlag;

/* ---- buffer attributes: where a buffer lives, for memory-usage reports and buffer queries ------ */

/* The caller owns a new set of attributes: delete it with BufferAttributesDelete. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesNew(
    TRITONSERVER_BufferAttributes** buffer_attributes);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesDelete(
    TRITONSERVER_BufferAttributes* buffer_attributes);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryTypeId(
    TRITONSERVER_BufferAttributes* buffer_attributes, int64_t memory_type_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetMemoryType(
    TRITONSERVER_BufferAttributes* buffer_attributes, TRITONSERVER_MemoryType memory_type);
/* GPU buffers shared between processes only; NULL otherwise. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetCudaIpcHandle(
    TRITONSERVER_BufferAttributes* buffer_attributes, void* cuda_ipc_handle);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesSetByteSize(
    TRITONSERVER_BufferAttributes* buffer_attributes, size_t byte_size);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryTypeId(
    TRITONSERVER_BufferAttributes* buffer_attributes, int64_t* memory_type_id);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesMemoryType(
    TRITONSERVER_BufferAttributes* buffer_attributes, TRITONSERVER_MemoryType* memory_type);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesCudaIpcHandle(
    TRITONSERVER_BufferAttributes* buffer_attributes, void** cuda_ipc_handle);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_BufferAttributesByteSize(
    TRITONSERVER_BufferAttributes* buffer_attributes, size_t* byte_size);

/* ---- custom metrics (shown on the /metrics endpoint beside Triton's own) --------------------------- */

typedef enum TRITONSERVER_metrickind_enum {
  TRITONSERVER_METRIC_KIND_COUNTER = 0,
  TRITONSERVER_METRIC_KIND_GAUGE = 1
} TRITONSERVER_MetricKind;

/* A family is one metric name with its HELP text; the caller owns it. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(
    TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind, const char* name,
    const char* description);
/* Refused while metrics of the family still exist: delete those first. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* family);
/* One time series of the family, identified by its labels (STRING parameters: name = label key).
 * The labels are copied, so they may be deleted right after the call. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricNew(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricValue(TRITONSERVER_Metric* metric, double* value);
/* Any amount for a gauge; a counter only accepts amounts >= 0 (INVALID_ARG otherwise). */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value);
/* Gauges only: a counter answers UNSUPPORTED. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MetricSet(TRITONSERVER_Metric* metric, double value);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_GetMetricKind(
    TRITONSERVER_Metric* metric, TRITONSERVER_MetricKind* kind);

#ifdef __cplusplus
}
#endif

/* The rest of the API, kept in files of their own so that each of labkit's declaration files stays
 * short enough to read; they belong to this header, which is the only one that includes them, as
 * they are part of tritonserver.h in Triton's own headers. */
#include "triton/core/labkit_inference_request.h"
#include "triton/core/labkit_server_traces.h"
#include "triton/core/labkit_server_embedding.h"

#endif /* TRITONSERVER_API_VERSION_MAJOR */
#endif /* LABKIT_TRITON_CORE_TRITONSERVER_H */
