/* JSON nesting depth without parsing (see fluxfs/json_depth.h): one pass over the bytes that
 * tracks only whether it is in a string or a comment. */
#include "fluxfs/json_depth.h"

bool json_depth_within(const char *text, size_t len, unsigned max_depth)
{
    unsigned depth = 0;
    size_t i = 0;
    while (i < len && text[i] != '\0') {
        char c = text[i++];
        switch (c) {
        case '[':
        case '{':
            if (++depth > max_depth)
                return false;
            break;
        case ']':
        case '}':
            if (depth > 0) /* unbalanced: the parser rejects it */
                depth--;
            break;
        case '"':
            while (i < len && text[i] != '\0' && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            i++; /* the closing quote (or past the end, which ends the loop) */
            break;
        case '/':
            if (i < len && text[i] == '*') {
                i++;
                while (i < len && text[i] != '\0' &&
                       !(text[i] == '*' && i + 1 < len && text[i + 1] == '/'))
                    i++;
                i += 2;
            } else if (i < len && text[i] == '/') {
                while (i < len && text[i] != '\0' && text[i] != '\n')
                    i++;
            }
            break;
        default:
            break;
        }
    }
    return true;
}
