/* This is a generated file, edit the .stub.php file instead.
 * Stub hash: 0a0338b84ecc9ac9bac7abd7ab63d831c77fd5ac */

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_Shmlink_stats, 0, 0, IS_ARRAY, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Shmlink_Client___construct, 0, 0, 1)
	ZEND_ARG_TYPE_INFO(0, address, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, options, IS_ARRAY, 0, "[]")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_call, 0, 1, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO(0, request, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, timeout, IS_DOUBLE, 1, "null")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_send, 0, 1, IS_LONG, 0)
	ZEND_ARG_TYPE_INFO(0, request, IS_STRING, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_receive, 0, 0, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(1, id, IS_LONG, 1, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, timeout, IS_DOUBLE, 1, "null")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_tryReceive, 0, 0, IS_ARRAY, 1)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_abandon, 0, 1, _IS_BOOL, 0)
	ZEND_ARG_TYPE_INFO(0, id, IS_LONG, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Shmlink_Client_stream, 0, 0, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_notify, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, message, IS_STRING, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_isConnected, 0, 0, _IS_BOOL, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_transport, 0, 0, IS_STRING, 1)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Client_close, 0, 0, IS_VOID, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Shmlink_Server___construct, 0, 0, 1)
	ZEND_ARG_TYPE_MASK(0, addresses, MAY_BE_STRING|MAY_BE_ARRAY, NULL)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, options, IS_ARRAY, 0, "[]")
ZEND_END_ARG_INFO()

#define arginfo_class_Shmlink_Server_addresses arginfo_Shmlink_stats

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Server_serve, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, handler, IS_CALLABLE, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Shmlink_Server_stop arginfo_class_Shmlink_Client_close

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Shmlink_Worker___construct, 0, 0, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, address, IS_STRING, 1, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, options, IS_ARRAY, 0, "[]")
ZEND_END_ARG_INFO()

#define arginfo_class_Shmlink_Worker_run arginfo_class_Shmlink_Server_serve

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_TYPE_MASK_EX(arginfo_class_Shmlink_Worker_accept, 0, 0, Shmlink\\HttpRequest, MAY_BE_STRING|MAY_BE_NULL)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Worker_respond, 0, 1, IS_VOID, 0)
	ZEND_ARG_OBJ_TYPE_MASK(0, response, Shmlink\\HttpResponse, MAY_BE_STRING, NULL)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Worker_fail, 0, 2, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, code, IS_LONG, 0)
	ZEND_ARG_TYPE_INFO(0, message, IS_STRING, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Worker_stream, 0, 0, IS_VOID, 0)
	ZEND_ARG_OBJ_TYPE_MASK(0, head, Shmlink\\HttpResponse, MAY_BE_STRING, "\"\"")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_Worker_write, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, data, IS_STRING, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Shmlink_Worker_end arginfo_class_Shmlink_Client_close

#define arginfo_class_Shmlink_HttpRequest___construct arginfo_class_Shmlink_Client_stream

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Shmlink_HttpRequest_header, 0, 1, IS_STRING, 1)
	ZEND_ARG_TYPE_INFO(0, name, IS_STRING, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Shmlink_HttpRequest_bodyStream arginfo_class_Shmlink_Client_stream

#define arginfo_class_Shmlink_HttpRequest_globals arginfo_class_Shmlink_Client_close

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Shmlink_HttpResponse___construct, 0, 0, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, status, IS_LONG, 0, "200")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, body, IS_STRING, 0, "\'\'")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, headers, IS_ARRAY, 0, "[]")
ZEND_END_ARG_INFO()


ZEND_FUNCTION(Shmlink_stats);
ZEND_METHOD(Shmlink_Client, __construct);
ZEND_METHOD(Shmlink_Client, call);
ZEND_METHOD(Shmlink_Client, send);
ZEND_METHOD(Shmlink_Client, receive);
ZEND_METHOD(Shmlink_Client, tryReceive);
ZEND_METHOD(Shmlink_Client, abandon);
ZEND_METHOD(Shmlink_Client, stream);
ZEND_METHOD(Shmlink_Client, notify);
ZEND_METHOD(Shmlink_Client, isConnected);
ZEND_METHOD(Shmlink_Client, transport);
ZEND_METHOD(Shmlink_Client, close);
ZEND_METHOD(Shmlink_Server, __construct);
ZEND_METHOD(Shmlink_Server, addresses);
ZEND_METHOD(Shmlink_Server, serve);
ZEND_METHOD(Shmlink_Server, stop);
ZEND_METHOD(Shmlink_Worker, __construct);
ZEND_METHOD(Shmlink_Worker, run);
ZEND_METHOD(Shmlink_Worker, accept);
ZEND_METHOD(Shmlink_Worker, respond);
ZEND_METHOD(Shmlink_Worker, fail);
ZEND_METHOD(Shmlink_Worker, stream);
ZEND_METHOD(Shmlink_Worker, write);
ZEND_METHOD(Shmlink_Worker, end);
ZEND_METHOD(Shmlink_HttpRequest, __construct);
ZEND_METHOD(Shmlink_HttpRequest, header);
ZEND_METHOD(Shmlink_HttpRequest, bodyStream);
ZEND_METHOD(Shmlink_HttpRequest, globals);
ZEND_METHOD(Shmlink_HttpResponse, __construct);


static const zend_function_entry ext_functions[] = {
	ZEND_NS_FALIAS("Shmlink", stats, Shmlink_stats, arginfo_Shmlink_stats)
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_Client_methods[] = {
	ZEND_ME(Shmlink_Client, __construct, arginfo_class_Shmlink_Client___construct, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, call, arginfo_class_Shmlink_Client_call, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, send, arginfo_class_Shmlink_Client_send, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, receive, arginfo_class_Shmlink_Client_receive, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, tryReceive, arginfo_class_Shmlink_Client_tryReceive, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, abandon, arginfo_class_Shmlink_Client_abandon, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, stream, arginfo_class_Shmlink_Client_stream, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, notify, arginfo_class_Shmlink_Client_notify, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, isConnected, arginfo_class_Shmlink_Client_isConnected, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, transport, arginfo_class_Shmlink_Client_transport, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Client, close, arginfo_class_Shmlink_Client_close, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_Server_methods[] = {
	ZEND_ME(Shmlink_Server, __construct, arginfo_class_Shmlink_Server___construct, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Server, addresses, arginfo_class_Shmlink_Server_addresses, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Server, serve, arginfo_class_Shmlink_Server_serve, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Server, stop, arginfo_class_Shmlink_Server_stop, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_Worker_methods[] = {
	ZEND_ME(Shmlink_Worker, __construct, arginfo_class_Shmlink_Worker___construct, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, run, arginfo_class_Shmlink_Worker_run, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, accept, arginfo_class_Shmlink_Worker_accept, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, respond, arginfo_class_Shmlink_Worker_respond, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, fail, arginfo_class_Shmlink_Worker_fail, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, stream, arginfo_class_Shmlink_Worker_stream, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, write, arginfo_class_Shmlink_Worker_write, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_Worker, end, arginfo_class_Shmlink_Worker_end, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_HttpRequest_methods[] = {
	ZEND_ME(Shmlink_HttpRequest, __construct, arginfo_class_Shmlink_HttpRequest___construct, ZEND_ACC_PRIVATE)
	ZEND_ME(Shmlink_HttpRequest, header, arginfo_class_Shmlink_HttpRequest_header, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_HttpRequest, bodyStream, arginfo_class_Shmlink_HttpRequest_bodyStream, ZEND_ACC_PUBLIC)
	ZEND_ME(Shmlink_HttpRequest, globals, arginfo_class_Shmlink_HttpRequest_globals, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_HttpResponse_methods[] = {
	ZEND_ME(Shmlink_HttpResponse, __construct, arginfo_class_Shmlink_HttpResponse___construct, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_Exception_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_ConnectException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_TimeoutException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_ClosedException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_RemoteException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Shmlink_ProtocolException_methods[] = {
	ZEND_FE_END
};

static zend_class_entry *register_class_Shmlink_Client(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "Client", class_Shmlink_Client_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NO_DYNAMIC_PROPERTIES|ZEND_ACC_NOT_SERIALIZABLE;

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_Server(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "Server", class_Shmlink_Server_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NO_DYNAMIC_PROPERTIES|ZEND_ACC_NOT_SERIALIZABLE;

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_Worker(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "Worker", class_Shmlink_Worker_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NO_DYNAMIC_PROPERTIES|ZEND_ACC_NOT_SERIALIZABLE;

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_HttpRequest(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "HttpRequest", class_Shmlink_HttpRequest_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NO_DYNAMIC_PROPERTIES|ZEND_ACC_NOT_SERIALIZABLE;

	zval property_method_default_value;
	ZVAL_UNDEF(&property_method_default_value);
	zend_string *property_method_name = zend_string_init("method", sizeof("method") - 1, 1);
	zend_declare_typed_property(class_entry, property_method_name, &property_method_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_method_name);

	zval property_uri_default_value;
	ZVAL_UNDEF(&property_uri_default_value);
	zend_string *property_uri_name = zend_string_init("uri", sizeof("uri") - 1, 1);
	zend_declare_typed_property(class_entry, property_uri_name, &property_uri_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_uri_name);

	zval property_path_default_value;
	ZVAL_UNDEF(&property_path_default_value);
	zend_string *property_path_name = zend_string_init("path", sizeof("path") - 1, 1);
	zend_declare_typed_property(class_entry, property_path_name, &property_path_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_path_name);

	zval property_query_default_value;
	ZVAL_UNDEF(&property_query_default_value);
	zend_string *property_query_name = zend_string_init("query", sizeof("query") - 1, 1);
	zend_declare_typed_property(class_entry, property_query_name, &property_query_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_query_name);

	zval property_protocol_default_value;
	ZVAL_UNDEF(&property_protocol_default_value);
	zend_string *property_protocol_name = zend_string_init("protocol", sizeof("protocol") - 1, 1);
	zend_declare_typed_property(class_entry, property_protocol_name, &property_protocol_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_protocol_name);

	zval property_headers_default_value;
	ZVAL_UNDEF(&property_headers_default_value);
	zend_string *property_headers_name = zend_string_init("headers", sizeof("headers") - 1, 1);
	zend_declare_typed_property(class_entry, property_headers_name, &property_headers_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_ARRAY));
	zend_string_release(property_headers_name);

	zval property_body_default_value;
	ZVAL_UNDEF(&property_body_default_value);
	zend_string *property_body_name = zend_string_init("body", sizeof("body") - 1, 1);
	zend_declare_typed_property(class_entry, property_body_name, &property_body_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_body_name);

	zval property_remoteAddr_default_value;
	ZVAL_UNDEF(&property_remoteAddr_default_value);
	zend_string *property_remoteAddr_name = zend_string_init("remoteAddr", sizeof("remoteAddr") - 1, 1);
	zend_declare_typed_property(class_entry, property_remoteAddr_name, &property_remoteAddr_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_remoteAddr_name);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_HttpResponse(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "HttpResponse", class_Shmlink_HttpResponse_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NO_DYNAMIC_PROPERTIES|ZEND_ACC_NOT_SERIALIZABLE;

	zval property_status_default_value;
	ZVAL_UNDEF(&property_status_default_value);
	zend_string *property_status_name = zend_string_init("status", sizeof("status") - 1, 1);
	zend_declare_typed_property(class_entry, property_status_name, &property_status_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_LONG));
	zend_string_release(property_status_name);

	zval property_body_default_value;
	ZVAL_UNDEF(&property_body_default_value);
	zend_string *property_body_name = zend_string_init("body", sizeof("body") - 1, 1);
	zend_declare_typed_property(class_entry, property_body_name, &property_body_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_STRING));
	zend_string_release(property_body_name);

	zval property_headers_default_value;
	ZVAL_UNDEF(&property_headers_default_value);
	zend_string *property_headers_name = zend_string_init("headers", sizeof("headers") - 1, 1);
	zend_declare_typed_property(class_entry, property_headers_name, &property_headers_default_value, ZEND_ACC_PUBLIC|ZEND_ACC_READONLY, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_ARRAY));
	zend_string_release(property_headers_name);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_Exception(zend_class_entry *class_entry_RuntimeException)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "Exception", class_Shmlink_Exception_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_RuntimeException);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_ConnectException(zend_class_entry *class_entry_Shmlink_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "ConnectException", class_Shmlink_ConnectException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Shmlink_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_TimeoutException(zend_class_entry *class_entry_Shmlink_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "TimeoutException", class_Shmlink_TimeoutException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Shmlink_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_ClosedException(zend_class_entry *class_entry_Shmlink_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "ClosedException", class_Shmlink_ClosedException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Shmlink_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_RemoteException(zend_class_entry *class_entry_Shmlink_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "RemoteException", class_Shmlink_RemoteException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Shmlink_Exception);

	zval const_CLOSED_value;
	ZVAL_LONG(&const_CLOSED_value, SHMLINK_REMOTE_CLOSED);
	zend_string *const_CLOSED_name = zend_string_init_interned("CLOSED", sizeof("CLOSED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_CLOSED_name, &const_CLOSED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_CLOSED_name);

	zval const_HANDLER_PANICKED_value;
	ZVAL_LONG(&const_HANDLER_PANICKED_value, SHMLINK_REMOTE_HANDLER_PANICKED);
	zend_string *const_HANDLER_PANICKED_name = zend_string_init_interned("HANDLER_PANICKED", sizeof("HANDLER_PANICKED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_HANDLER_PANICKED_name, &const_HANDLER_PANICKED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_HANDLER_PANICKED_name);

	zval const_RESPONSE_TOO_LARGE_value;
	ZVAL_LONG(&const_RESPONSE_TOO_LARGE_value, SHMLINK_REMOTE_RESPONSE_TOO_LARGE);
	zend_string *const_RESPONSE_TOO_LARGE_name = zend_string_init_interned("RESPONSE_TOO_LARGE", sizeof("RESPONSE_TOO_LARGE") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_RESPONSE_TOO_LARGE_name, &const_RESPONSE_TOO_LARGE_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_RESPONSE_TOO_LARGE_name);

	zval const_HANDLER_EXCEPTION_value;
	ZVAL_LONG(&const_HANDLER_EXCEPTION_value, SHMLINK_REMOTE_HANDLER_EXCEPTION);
	zend_string *const_HANDLER_EXCEPTION_name = zend_string_init_interned("HANDLER_EXCEPTION", sizeof("HANDLER_EXCEPTION") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_HANDLER_EXCEPTION_name, &const_HANDLER_EXCEPTION_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_HANDLER_EXCEPTION_name);

	zval const_PROTOCOL_ERROR_value;
	ZVAL_LONG(&const_PROTOCOL_ERROR_value, SHMLINK_REMOTE_PROTOCOL_ERROR);
	zend_string *const_PROTOCOL_ERROR_name = zend_string_init_interned("PROTOCOL_ERROR", sizeof("PROTOCOL_ERROR") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_PROTOCOL_ERROR_name, &const_PROTOCOL_ERROR_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_PROTOCOL_ERROR_name);

	zval const_SHUTTING_DOWN_value;
	ZVAL_LONG(&const_SHUTTING_DOWN_value, SHMLINK_REMOTE_SHUTTING_DOWN);
	zend_string *const_SHUTTING_DOWN_name = zend_string_init_interned("SHUTTING_DOWN", sizeof("SHUTTING_DOWN") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_SHUTTING_DOWN_name, &const_SHUTTING_DOWN_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_SHUTTING_DOWN_name);

	zval const_NOT_ANSWERED_value;
	ZVAL_LONG(&const_NOT_ANSWERED_value, SHMLINK_REMOTE_NOT_ANSWERED);
	zend_string *const_NOT_ANSWERED_name = zend_string_init_interned("NOT_ANSWERED", sizeof("NOT_ANSWERED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_NOT_ANSWERED_name, &const_NOT_ANSWERED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_NOT_ANSWERED_name);

	zval const_NO_WORKER_value;
	ZVAL_LONG(&const_NO_WORKER_value, SHMLINK_REMOTE_NO_WORKER);
	zend_string *const_NO_WORKER_name = zend_string_init_interned("NO_WORKER", sizeof("NO_WORKER") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_NO_WORKER_name, &const_NO_WORKER_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_NO_WORKER_name);

	zval const_QUEUE_FULL_value;
	ZVAL_LONG(&const_QUEUE_FULL_value, SHMLINK_REMOTE_QUEUE_FULL);
	zend_string *const_QUEUE_FULL_name = zend_string_init_interned("QUEUE_FULL", sizeof("QUEUE_FULL") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_QUEUE_FULL_name, &const_QUEUE_FULL_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_QUEUE_FULL_name);

	zval const_WORKER_DIED_value;
	ZVAL_LONG(&const_WORKER_DIED_value, SHMLINK_REMOTE_WORKER_DIED);
	zend_string *const_WORKER_DIED_name = zend_string_init_interned("WORKER_DIED", sizeof("WORKER_DIED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_WORKER_DIED_name, &const_WORKER_DIED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_WORKER_DIED_name);

	zval const_WORKER_TIMEOUT_value;
	ZVAL_LONG(&const_WORKER_TIMEOUT_value, SHMLINK_REMOTE_WORKER_TIMEOUT);
	zend_string *const_WORKER_TIMEOUT_name = zend_string_init_interned("WORKER_TIMEOUT", sizeof("WORKER_TIMEOUT") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_WORKER_TIMEOUT_name, &const_WORKER_TIMEOUT_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_WORKER_TIMEOUT_name);

	zval const_POOL_STOPPING_value;
	ZVAL_LONG(&const_POOL_STOPPING_value, SHMLINK_REMOTE_POOL_STOPPING);
	zend_string *const_POOL_STOPPING_name = zend_string_init_interned("POOL_STOPPING", sizeof("POOL_STOPPING") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_POOL_STOPPING_name, &const_POOL_STOPPING_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_POOL_STOPPING_name);

	zval const_NO_WORKERS_START_value;
	ZVAL_LONG(&const_NO_WORKERS_START_value, SHMLINK_REMOTE_NO_WORKERS_START);
	zend_string *const_NO_WORKERS_START_name = zend_string_init_interned("NO_WORKERS_START", sizeof("NO_WORKERS_START") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_NO_WORKERS_START_name, &const_NO_WORKERS_START_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_NO_WORKERS_START_name);

	zval const_UNKNOWN_COMMAND_value;
	ZVAL_LONG(&const_UNKNOWN_COMMAND_value, SHMLINK_REMOTE_UNKNOWN_COMMAND);
	zend_string *const_UNKNOWN_COMMAND_name = zend_string_init_interned("UNKNOWN_COMMAND", sizeof("UNKNOWN_COMMAND") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_UNKNOWN_COMMAND_name, &const_UNKNOWN_COMMAND_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_UNKNOWN_COMMAND_name);

	zval property_callId_default_value;
	ZVAL_NULL(&property_callId_default_value);
	zend_string *property_callId_name = zend_string_init("callId", sizeof("callId") - 1, 1);
	zend_declare_typed_property(class_entry, property_callId_name, &property_callId_default_value, ZEND_ACC_PUBLIC, NULL, (zend_type) ZEND_TYPE_INIT_MASK(MAY_BE_LONG|MAY_BE_NULL));
	zend_string_release(property_callId_name);

	return class_entry;
}

static zend_class_entry *register_class_Shmlink_ProtocolException(zend_class_entry *class_entry_Shmlink_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Shmlink", "ProtocolException", class_Shmlink_ProtocolException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Shmlink_Exception);

	return class_entry;
}
