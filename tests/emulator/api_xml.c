/* The Cloud Storage XML API of the emulator (path style /BUCKET/OBJECT). */
#include <string.h>

#include "server.h"

static void handle_not_implemented(struct emu_request *req, struct emu_reply *reply)
{
    emu_reply_xml_error(reply, 501, "NotImplemented", "The XML API is not implemented yet.");
}

unsigned api_xml_route(struct emu_request *req)
{
    req->op = EMU_OP_NONE;
    req->handler = handle_not_implemented;
    req->body_limit = EMU_XML_BODY_MAX;
    return 0;
}
